#!/bin/sh
# usage: check_soname.sh FAKE REAL [FAKE REAL ...]
# Checks that each fake library has the real library's SONAME and the same version-definition
# node names (readelf -V; none for libcuda.so.1), and that it exports something (nm -D).
# Other fakes (cuBLAS, cuDNN, ...) add their pairs to the ctest that calls this.
status=0
soname() { readelf -d "$1" | sed -n 's/.*Library soname: \[\(.*\)\].*/\1/p'; }
verdefs() { readelf -V "$1" | sed -n '/Version definition section/,/^$/p' | sed -n 's/.*Name: \([^ ]*\).*/\1/p' | sort -u; }
while [ $# -ge 2 ]; do
  fake=$1 real=$2
  shift 2
  for f in "$fake" "$real"; do
    [ -r "$f" ] || { echo "FAIL: cannot read $f"; status=1; continue 2; }
  done
  if [ "$(soname "$fake")" != "$(soname "$real")" ]; then
    echo "FAIL: $fake SONAME '$(soname "$fake")' != '$(soname "$real")' ($real)"; status=1
  fi
  if [ "$(verdefs "$fake")" != "$(verdefs "$real")" ]; then
    echo "FAIL: $fake version nodes '$(verdefs "$fake" | tr '\n' ' ')' != '$(verdefs "$real" | tr '\n' ' ')'"; status=1
  fi
  if [ "$(nm -D --defined-only "$fake" | wc -l)" -eq 0 ]; then
    echo "FAIL: $fake exports nothing"; status=1
  fi
  [ $status -eq 0 ] && echo "ok: $fake ($(soname "$fake"), nodes: $(verdefs "$fake" | tr '\n' ' '))"
done
[ $# -eq 0 ] || { echo "usage: $0 FAKE REAL [FAKE REAL ...]"; exit 2; }
exit $status
