#!/usr/bin/env python3
"""Times one Python API table on a capture, for docs/BENCH.md ("Python API").

usage: py_tables.py CAPTURE steps|records [COLUMNS|all] [TYPES]
  e.g. py_tables.py hf95k.tokprof records type,host_ns
Prints the call's seconds, rows, records/s (records: rows of the table) and the process's peak RSS.
The decoder library and the package come from TOKPROF_DECODER_LIB / PYTHONPATH or the install.
"""
import resource
import sys
import time

import pyarrow  # noqa: F401  (imported before the clock starts)
import tokprof

path, what = sys.argv[1], sys.argv[2]
cap = tokprof.open(path)
t0 = time.perf_counter()
if what == "steps":
    t = cap.steps()
else:
    cols = None if len(sys.argv) < 4 or sys.argv[3] == "all" else sys.argv[3].split(",")
    types = sys.argv[4].split(",") if len(sys.argv) > 4 else None
    t = cap.records(types=types, columns=cols)
dt = time.perf_counter() - t0
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(f"{what} {' '.join(sys.argv[3:])}: {dt:.3f} s, {t.num_rows} rows x {t.num_columns} columns, "
      f"{t.num_rows / dt / 1e6:.1f} M rows/s, table {t.nbytes / 1e6:.0f} MB, peak RSS {rss:.0f} MB")
