#!/usr/bin/env python3
"""Times one Python API table on a capture, for docs/BENCH.md ("Python API").

usage: py_tables.py CAPTURE steps|records [COLUMNS|all] [TYPES]
  e.g. py_tables.py hf95k.tokprof records type,host_ns
Prints the call's wall and CPU seconds (on a shared machine the CPU time is the cost), rows,
rows per CPU second, the table's bytes and the process's peak RSS.
The decoder library and the package come from TOKPROF_DECODER_LIB / PYTHONPATH or the install.
"""
import resource
import sys
import time

import pyarrow  # noqa: F401  (imported before the clock starts)
import tokprof

path, what = sys.argv[1], sys.argv[2]
cap = tokprof.open(path)
t0, c0 = time.perf_counter(), time.process_time()
if what == "steps":
    t = cap.steps()
else:
    cols = None if len(sys.argv) < 4 or sys.argv[3] == "all" else sys.argv[3].split(",")
    types = sys.argv[4].split(",") if len(sys.argv) > 4 else None
    t = cap.records(types=types, columns=cols)
dt, cpu = time.perf_counter() - t0, time.process_time() - c0
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(f"{what} {' '.join(sys.argv[3:])}: {dt:.3f} s wall, {cpu:.3f} s CPU, {t.num_rows} rows x "
      f"{t.num_columns} columns, {t.num_rows / cpu / 1e6:.1f} M rows per CPU second, "
      f"table {t.nbytes / 1e6:.0f} MB, peak RSS {rss:.0f} MB")
