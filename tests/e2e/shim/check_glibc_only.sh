#!/usr/bin/env bash
# The shim and the CLI must run on a host that has only glibc (production hosts, GPU machines
# without our -dev packages): zstd and msgpack-c are linked in statically.
set -euo pipefail
fail=0
for f in "$@"; do
    deps=$(readelf -d "$f" | sed -n 's/.*NEEDED.*\[\(.*\)\]/\1/p' | tr '\n' ' ')
    for d in $deps; do
        case "$d" in libc.so.*|libdl.so.*|libpthread.so.*|libm.so.*|librt.so.*|ld-linux*) ;;
        *) echo "FAIL: $f needs $d"; fail=1 ;;
        esac
    done
    echo "$f: NEEDED $deps"
done
exit $fail
