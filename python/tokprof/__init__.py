"""tokprof: where did the time of each output token go on the GPU?

Captures written by the preloaded shim (``tokprof run -o caps/ -- python serve.py``, or
``LD_PRELOAD=libtokprof.so``) read as Arrow tables, decoded in C by the library the package
ships (libtokprof_decoder.so) and handed over by the Arrow C Data Interface, without a copy:

    >>> import tokprof
    >>> cap = tokprof.open("caps/")              # a capture, or a directory of them (merged)
    >>> cap.steps().to_pandas()                  # one row per step, as `tokprof steps --json`
    >>> cap.records(types=["gpu_kernel"], columns=["name", "start_ns", "end_ns"])
    >>> cap.summary()["itl_ns"]["p50"]           # the dict of `tokprof summary --json`
    >>> tokprof.check("slo.tks", cap).passed     # spec checking (docs/SPEC.md)

Step markers for a Python serving loop run with ``TOKPROF_STEP=marker``:

    >>> for batch in batches:
    ...     with tokprof.step():
    ...         model.generate_one(batch)

The same CLI is installed as the ``tokprof`` command and ``python -m tokprof``.
"""
from __future__ import annotations

import ctypes
import json
import os
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Dict, Iterator, List, Optional, Sequence, Union

from . import _native
from ._native import TokprofError

if TYPE_CHECKING:  # pyarrow is imported when a table is first asked for
    import pyarrow

__all__ = ["open", "Capture", "CheckResult", "check", "step", "step_begin", "step_end",
           "TokprofError", "RECORD_COLUMNS", "RECORD_TYPES", "__version__"]

__version__ = "0.1.0"

PathLike = Union[str, "os.PathLike[str]"]

#: The columns of :meth:`Capture.records`, in their order.
RECORD_COLUMNS: List[str] = ["type", "pid", "thread", "tid", "step", "host_ns", "name",
                             "stream", "start_ns", "end_ns", "graph", "grid_x", "grid_y",
                             "grid_z", "block_x", "block_y", "block_z", "bytes", "m", "n", "k",
                             "batch", "wait_ns", "value"]

#: The record type words of :meth:`Capture.records` (``tokprof dump``'s).
RECORD_TYPES: List[str] = ["chunk", "name", "meta", "thread", "launch", "graph_launch", "graph",
                           "copy", "sync", "event_record", "stream_wait", "step", "nvtx", "loss",
                           "marker", "lib_call", "stack", "module", "gpu_kernel", "gpu_copy",
                           "gpu_info"]


def _table(rows: List[Dict[str, Any]]) -> "pyarrow.Table":
    import pyarrow as pa

    return pa.Table.from_pylist(rows)


def _mask(wanted: Optional[Sequence[str]], known: Dict[str, int], what: str) -> int:
    """The bit mask of the wanted names (0: all, when None)."""
    if wanted is None:
        return 0
    if isinstance(wanted, str):
        wanted = [wanted]
    mask = 0
    for w in wanted:
        if w not in known:
            raise ValueError(f"unknown {what} {w!r} (one of {sorted(known)})")
        mask |= 1 << known[w]
    if not mask:
        raise ValueError(f"no {what} given")
    return mask


class Capture:
    """One capture, or several merged on one timeline (a directory of a multi-process run, a
    rotated capture): what :func:`open` returns. Each method reads the files again, streaming,
    in C; nothing is cached. A torn capture (a killed program's) yields its whole chunks and a
    ``RuntimeWarning`` naming the byte where it stops."""

    def __init__(self, paths: Sequence[PathLike]) -> None:
        self.paths: List[str] = [os.fspath(p) for p in paths]
        _native.probe(self.paths)

    def __repr__(self) -> str:
        return f"tokprof.Capture({self.paths!r})"

    def _cli(self, *argv: str) -> Any:
        code, out, why = _native.command([argv[0], *argv[1:], *self.paths])
        if code:
            raise TokprofError(why, code)
        return json.loads(out)

    def steps(self, classes: Optional[PathLike] = None) -> "pyarrow.Table":
        """One row per step (segment) of every thread: ``pyarrow.Table`` with the columns and
        values of ``tokprof steps --json`` (thread, tid, seg, step, kind, tokens, ..., and the
        GPU columns span_ns, busy_ns, idle_ns, top_class... when the capture has GPU records).
        ``classes``: a file of extra ``CLASS REGEX`` lines, as ``--classes``."""
        return _native.steps(self.paths, os.fspath(classes) if classes else None)

    def step_classes(self, classes: Optional[PathLike] = None) -> "pyarrow.Table":
        """GPU kernel time per step and kernel class: one row per (step, class) with kernels or
        time in it (thread, tid, pid, seg, step, begin_ns, class, kernels, gpu_ns, tokens: the
        columns and values of ``tokprof table step_classes``, with tid and pid)."""
        return _native.steps(self.paths, os.fspath(classes) if classes else None, which=1)

    def kernels(self, by: str = "name") -> "pyarrow.Table":
        """GPU time per kernel name (``by="name"``) or class (``by="class"``): the rows of
        ``tokprof kernels --json`` (name, base, class, count, and with GPU records total_ns,
        mean_ns, p50_ns, p99_ns, share, max_ns: the columns of ``tokprof table kernels`` over
        the whole capture, less hour_ns, with base, mean_ns and share)."""
        argv = ["kernels", "--json"] + (["--by", by] if by != "name" else [])
        return _table(self._cli(*argv)["rows"])

    def calls(self) -> "pyarrow.Table":
        """cuBLAS/cuBLASLt/cuDNN calls grouped by shape over the whole capture: the ``shapes``
        of ``tokprof gemm --json`` (op, m, n, k, batch, types, calls, flops, host_ns,
        gpu_ns...; executed calls only). ``tokprof table calls`` has them per hour, with failed
        and graph-captured calls counted too: its FLOPs and GPU time sum to these."""
        return _table(self._cli("gemm", "--json")["shapes"])

    def moe(self) -> "pyarrow.Table":
        """Mixture-of-experts routing: one row per (step, MoE layer, expert) of one process's
        capture (thread, tid, pid, seg, step, begin_ns, layer, expert, tokens routed to the
        expert in that layer, expert_gpu_ns: the columns and values of ``tokprof table moe``,
        with tid and pid). From per-expert GEMMs, as ``tokprof moe``: steps of fused-expert
        kernels, whose per-expert load is not observable, have no rows."""
        return _native.moe(self.paths)

    def records(self, types: Optional[Sequence[str]] = None,
                columns: Optional[Sequence[str]] = None) -> "pyarrow.Table":
        """The records themselves, one row each in timeline order: ``pyarrow.Table``.
        ``types``: record type words (:data:`RECORD_TYPES`, e.g. ``["launch", "gpu_kernel"]``),
        all when None. ``columns``: of :data:`RECORD_COLUMNS`, all when None; memory is
        proportional to the rows times the columns asked for. A column a record type does not
        have is null (``start_ns`` of a launch)."""
        tmask = _mask(types, _native.type_names(), "record type")
        cmask = _mask(columns, {c: i for i, c in enumerate(_native.col_names())}, "column")
        t = _native.records(self.paths, tmask, cmask)
        if columns is not None:
            t = t.select([columns] if isinstance(columns, str) else list(columns))
        return t

    def summary(self) -> Dict[str, Any]:
        """The run's summary: the dict of ``tokprof summary --json`` (tokens, itl_ns, ...)."""
        return self._cli("summary", "--json")


def open(path_or_dir: Union[PathLike, Sequence[PathLike]]) -> Capture:
    """Opens a capture file, a directory of captures (its ``*.tokprof`` files, merged by host
    time: one timeline for a multi-process server), or a list of either.

    Raises :class:`TokprofError` naming the file and the reason when one is not a readable
    capture (``"x.bin: not a tokprof capture (bad magic)"``); nothing is decoded until a table
    is asked for.

        >>> cap = tokprof.open("caps/")
        >>> cap.steps().to_pandas().describe()
    """
    if isinstance(path_or_dir, (str, bytes, os.PathLike)):
        paths = [os.fsdecode(path_or_dir)]
    else:
        paths = [os.fsdecode(p) for p in path_or_dir]
    return Capture(paths)


class CheckResult:
    """What :func:`check` found: ``passed`` (no error-severity assertion violated), and the
    JSON objects of ``tokprof check --json`` as dicts: ``assertions`` (one per assertion:
    status, evaluated, violations, ...) and ``violations`` (where, observed vs bound, witness)."""

    def __init__(self, code: int, lines: List[Dict[str, Any]]) -> None:
        self.passed: bool = code == 0
        self.assertions: List[Dict[str, Any]] = [o for o in lines if o.get("type") == "assertion"]
        self.violations: List[Dict[str, Any]] = [o for o in lines if o.get("type") == "violation"]

    def __bool__(self) -> bool:
        return self.passed

    def __repr__(self) -> str:
        return (f"CheckResult(passed={self.passed}, assertions={len(self.assertions)}, "
                f"violations={len(self.violations)})")


_VIOLATION = -12  # TKP_ERR_VIOLATION


def check(spec: PathLike, capture: Union[Capture, PathLike, Sequence[PathLike]],
          baseline: Optional[PathLike] = None) -> CheckResult:
    """Checks the spec file ``spec`` (docs/SPEC.md) over a capture (a :class:`Capture` or what
    :func:`open` takes), as ``tokprof check --json``. Returns a :class:`CheckResult`; raises
    :class:`TokprofError` when the spec or the capture cannot be read."""
    cap = capture if isinstance(capture, Capture) else open(capture)
    argv = ["check", "--json"]
    if baseline is not None:
        argv += ["--baseline", os.fspath(baseline)]
    code, out, why = _native.command(argv + [os.fspath(spec)] + cap.paths)
    if code and code != _VIOLATION:
        raise TokprofError(why, code)
    lines = [json.loads(l) for l in out.splitlines() if l.strip()]
    return CheckResult(code, lines)


# ---- step markers --------------------------------------------------------------------------

def _marker(name: str):
    """The shim's marker when it is preloaded (found by dlsym(RTLD_DEFAULT, name), as
    tokprof.h advises), else None."""
    try:
        f = getattr(ctypes.CDLL(None), name)
    except (AttributeError, OSError):
        return None
    f.restype = None
    f.argtypes = []
    return f


def _noop() -> None:
    return None


_begin = _marker("tokprof_step_begin")
_end = _marker("tokprof_step_end")

#: Marks the start of a generation step (``TOKPROF_STEP=marker``); does nothing when the shim
#: is not preloaded. One foreign call when it is (well under a microsecond).
step_begin = _begin or _noop
#: Marks the end of a step: its tokens are on the host. No-op without the shim.
step_end = _end or _noop


@contextmanager
def step() -> Iterator[None]:
    """``with tokprof.step(): ...``: one step around the body (``step_begin`` before,
    ``step_end`` after, also when it raises). No-op without the shim."""
    step_begin()
    try:
        yield
    finally:
        step_end()
