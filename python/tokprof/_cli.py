"""The ``tokprof`` console command: executes the CLI binary the package ships (tokprof/bin/),
so ``tokprof run`` finds the shim next to it (tokprof/lib/libtokprof.so)."""
import os
import sys


def binary() -> str:
    return os.environ.get("TOKPROF_CLI") or os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                         "bin", "tokprof")


def main() -> None:
    exe = binary()
    try:
        os.execv(exe, ["tokprof", *sys.argv[1:]])
    except OSError as e:
        sys.stderr.write(f"tokprof: cannot run {exe}: {e}\n")
        sys.exit(2)
