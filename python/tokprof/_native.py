"""The ctypes binding of libtokprof_decoder.so (include/tokprof/decoder.h).

Tables cross by the Arrow C Data Interface: the library fills an ``ArrowArray`` and an
``ArrowSchema`` that this module allocates, and pyarrow imports them without copying the columns.
"""
from __future__ import annotations

import ctypes
import os
import warnings
from typing import List, Optional, Sequence, Tuple

_HERE = os.path.dirname(os.path.abspath(__file__))


class TokprofError(Exception):
    """A capture could not be read or a command failed; the message is the decoder's one-line
    reason, naming the file ("PATH: not a tokprof capture (bad magic)")."""

    def __init__(self, message: str, code: int = 0) -> None:
        super().__init__(message)
        self.code = code


class _ArrowSchema(ctypes.Structure):
    _fields_ = [("format", ctypes.c_char_p), ("name", ctypes.c_char_p),
                ("metadata", ctypes.c_char_p), ("flags", ctypes.c_int64),
                ("n_children", ctypes.c_int64), ("children", ctypes.c_void_p),
                ("dictionary", ctypes.c_void_p), ("release", ctypes.c_void_p),
                ("private_data", ctypes.c_void_p)]


class _ArrowArray(ctypes.Structure):
    _fields_ = [("length", ctypes.c_int64), ("null_count", ctypes.c_int64),
                ("offset", ctypes.c_int64), ("n_buffers", ctypes.c_int64),
                ("n_children", ctypes.c_int64), ("buffers", ctypes.c_void_p),
                ("children", ctypes.c_void_p), ("dictionary", ctypes.c_void_p),
                ("release", ctypes.c_void_p), ("private_data", ctypes.c_void_p)]


def library_path() -> str:
    """Where libtokprof_decoder.so is: TOKPROF_DECODER_LIB, else the copy inside the package
    (a wheel installs it at tokprof/lib/)."""
    env = os.environ.get("TOKPROF_DECODER_LIB")
    if env:
        return env
    return os.path.join(_HERE, "lib", "libtokprof_decoder.so")


_lib = None


def lib() -> ctypes.CDLL:
    global _lib
    if _lib is not None:
        return _lib
    path = library_path()
    try:
        L = ctypes.CDLL(path)
    except OSError as e:
        raise TokprofError(f"{path}: cannot load the decoder library ({e})") from None
    P = ctypes.c_void_p
    S = ctypes.c_size_t
    pp = ctypes.POINTER(ctypes.c_char_p)
    outstr = ctypes.POINTER(ctypes.c_void_p)
    L.tkp_dec_version.restype = ctypes.c_char_p
    L.tkp_dec_probe.argtypes = [pp, S, ctypes.c_char_p, S]
    for f in (L.tkp_dec_steps, L.tkp_dec_step_classes):
        f.argtypes = [pp, S, ctypes.c_char_p, P, P, outstr, ctypes.c_char_p, S]
    L.tkp_dec_moe.argtypes = [pp, S, P, P, outstr, ctypes.c_char_p, S]
    L.tkp_dec_records.argtypes = [pp, S, ctypes.c_uint64, ctypes.c_uint64, P, P, outstr,
                                  ctypes.c_char_p, S]
    L.tkp_dec_col_name.argtypes = [ctypes.c_int]
    L.tkp_dec_col_name.restype = ctypes.c_char_p
    L.tkp_dec_type_name.argtypes = [ctypes.c_int]
    L.tkp_dec_type_name.restype = ctypes.c_char_p
    L.tkp_dec_command.argtypes = [ctypes.c_int, pp, outstr, outstr, ctypes.c_char_p, S]
    L.tkp_dec_free.argtypes = [P]
    for f in (L.tkp_dec_probe, L.tkp_dec_steps, L.tkp_dec_step_classes, L.tkp_dec_moe,
              L.tkp_dec_records, L.tkp_dec_command):
        f.restype = ctypes.c_int
    _lib = L
    return L


def _paths(paths: Sequence[str]):
    arr = (ctypes.c_char_p * len(paths))(*[os.fsencode(p) for p in paths])
    return arr, len(paths)


def _take(p: ctypes.c_void_p) -> Optional[str]:
    """A malloc'd C string handed back: its text, freed."""
    if not p.value:
        return None
    s = ctypes.string_at(p.value).decode("utf-8", "replace")
    lib().tkp_dec_free(p)
    return s


def _warn(w: ctypes.c_void_p, stacklevel: int = 4) -> None:
    text = _take(w)
    for line in (text or "").splitlines():
        warnings.warn(line, RuntimeWarning, stacklevel=stacklevel)


def probe(paths: Sequence[str]) -> None:
    arr, n = _paths(paths)
    why = ctypes.create_string_buffer(512)
    err = lib().tkp_dec_probe(arr, n, why, len(why))
    if err:
        raise TokprofError(why.value.decode("utf-8", "replace"), err)


def _import(call, *args):
    """Runs a table call and imports its result into pyarrow (no copy of the columns)."""
    try:
        import pyarrow as pa
    except ImportError:
        raise ImportError("tokprof's tables need pyarrow: pip install pyarrow "
                          "(or tokprof[arrow])") from None

    arr = _ArrowArray()
    sch = _ArrowSchema()
    warn = ctypes.c_void_p()
    why = ctypes.create_string_buffer(512)
    err = call(*args, ctypes.addressof(arr), ctypes.addressof(sch), ctypes.byref(warn), why,
               len(why))
    _warn(warn)
    if err:
        raise TokprofError(why.value.decode("utf-8", "replace"), err)
    batch = pa.RecordBatch._import_from_c(ctypes.addressof(arr), ctypes.addressof(sch))
    return pa.Table.from_batches([batch])


def steps(paths: Sequence[str], classes: Optional[str], which: int = 0):
    arr, n = _paths(paths)
    c = os.fsencode(classes) if classes else None
    f = lib().tkp_dec_step_classes if which else lib().tkp_dec_steps
    return _import(f, arr, n, c)


def moe(paths: Sequence[str]):
    arr, n = _paths(paths)
    return _import(lib().tkp_dec_moe, arr, n)


def col_names() -> List[str]:
    out, i = [], 0
    while True:
        s = lib().tkp_dec_col_name(i)
        if s is None:
            return out
        out.append(s.decode())
        i += 1


def type_names() -> dict:
    out = {}
    for i in range(64):
        s = lib().tkp_dec_type_name(i)
        if s is not None:
            out[s.decode()] = i
    return out


def records(paths: Sequence[str], types: int, columns: int):
    arr, n = _paths(paths)
    return _import(lib().tkp_dec_records, arr, n, ctypes.c_uint64(types), ctypes.c_uint64(columns))


def command(argv: Sequence[str]) -> Tuple[int, str, str]:
    """Runs a CLI subcommand in-process: (code, output, reason)."""
    args = (ctypes.c_char_p * len(argv))(*[os.fsencode(a) for a in argv])
    out = ctypes.c_void_p()
    warn = ctypes.c_void_p()
    why = ctypes.create_string_buffer(512)
    err = lib().tkp_dec_command(len(argv), args, ctypes.byref(out), ctypes.byref(warn), why,
                                len(why))
    _warn(warn)
    return err, _take(out) or "", why.value.decode("utf-8", "replace")


def version() -> str:
    return lib().tkp_dec_version().decode()
