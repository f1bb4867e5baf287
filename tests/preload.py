"""LD_PRELOAD for the shim under test, the one way every Python test builds it.

In the sanitizer build (TOKPROF_SANITIZE=ON) ctest gives every test TOKPROF_TEST_PRELOAD_PREFIX,
the ASan runtime: it must come first in a process's initial library list, before the instrumented
libtokprof.so (tests/CMakeLists.txt, tests/test_env.cmake.in). Elsewhere it is empty and the
preload is the shim alone. Shell tests spell the same rule as
${TOKPROF_TEST_PRELOAD_PREFIX:+$TOKPROF_TEST_PRELOAD_PREFIX:}$shim.

Scripts in tests/*/ import it with
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    from preload import shim_preload
Beside it: shim_env (a program on simgpu under a build's shim), capture_one (run one, return its
one capture) and format_version (a capture's header field), which the shim's e2e scripts share.
"""
import glob
import os
import subprocess
import sys


def shim_preload(shim):
    """The LD_PRELOAD value that loads `shim` (a path) into a test's program."""
    prefix = os.environ.get("TOKPROF_TEST_PRELOAD_PREFIX", "")
    return f"{prefix}:{shim}" if prefix else shim


def foreign_host(env):
    """`env` (a test's environment with the shim preloaded) for a program that is neither ours nor
    instrumented, such as python itself. In the sanitizer build the preloaded ASan runtime would
    check that program's heap at exit, and CPython leaves its heap to the OS by design: those
    leaks are not ours, and the shim does no more than its constructor in a process that never
    calls CUDA. Our programs (nvcc-built, simgpu, the CLI) keep the leak check."""
    if not env.get("TOKPROF_TEST_PRELOAD_PREFIX"):
        return env
    return dict(env, ASAN_OPTIONS=env.get("ASAN_OPTIONS", "") + ":detect_leaks=0")


def asan_host(env):
    """`env` for a python that loads our instrumented libraries itself (ctypes on simgpu's fakes)
    without the shim: in the sanitizer build the ASan runtime must be preloaded first, and
    CPython's heap is not ours to leak-check (foreign_host). Elsewhere `env` unchanged."""
    prefix = env.get("TOKPROF_TEST_PRELOAD_PREFIX")
    return foreign_host(dict(env, LD_PRELOAD=prefix)) if prefix else env


def shim_env(build, out, **settings):
    """The environment of a program run on `build`'s simgpu under its shim, capturing into `out`,
    with `settings` (TOKPROF_*, SIMGPU_* variables) on top of this process's environment."""
    return dict(os.environ, LD_LIBRARY_PATH=os.path.join(build, "tests/simgpu"),
                LD_PRELOAD=shim_preload(os.path.join(build, "shim/libtokprof.so")),
                TOKPROF_OUT=out, **settings)


def capture_one(build, out, argv, settings, timeout=300, stderr=None):
    """Runs `argv` with shim_env(build, out, **settings) and returns the path of the one capture it
    wrote into `out` (made if missing); a failed run or not exactly one capture ends the test with
    a FAIL line. stderr: a list the run's stderr is appended to."""
    os.makedirs(out, exist_ok=True)
    p = subprocess.run(argv, env=shim_env(build, out, **settings), capture_output=True, text=True,
                       timeout=timeout)
    if stderr is not None:
        stderr.append(p.stderr)
    if p.returncode:
        sys.exit(f"FAIL: {' '.join(argv)}: exit {p.returncode}: {p.stderr}")
    caps = glob.glob(os.path.join(out, "*.tokprof"))
    if len(caps) != 1:
        sys.exit(f"FAIL: {len(caps)} captures in {out}")
    return caps[0]


def format_version(cap):
    """The format version a capture's header declares (docs/FORMAT.md: bytes 8-9, little-endian)."""
    with open(cap, "rb") as f:
        return int.from_bytes(f.read(16)[8:10], "little")
