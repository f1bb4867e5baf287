"""LD_PRELOAD for the shim under test, the one way every Python test builds it.

In the sanitizer build (TOKPROF_SANITIZE=ON) ctest gives every test TOKPROF_TEST_PRELOAD_PREFIX,
the ASan runtime: it must come first in a process's initial library list, before the instrumented
libtokprof.so (tests/CMakeLists.txt, tests/test_env.cmake.in). Elsewhere it is empty and the
preload is the shim alone. Shell tests spell the same rule as
${TOKPROF_TEST_PRELOAD_PREFIX:+$TOKPROF_TEST_PRELOAD_PREFIX:}$shim.

Scripts in tests/*/ import it with
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    from preload import shim_preload
"""
import os


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
