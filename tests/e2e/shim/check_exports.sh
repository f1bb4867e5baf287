#!/usr/bin/env bash
# The shim exports exactly the checked-in list (shim/exports.txt): interposed entry points and the
# public markers, with their version nodes. No zstd, msgpack or internal symbol may leak: the
# shim is a guest in someone's process and must not preempt their libraries.
set -euo pipefail
lib=$1 list=$2
actual=$(nm -D --defined-only "$lib" | awk '{print $3}' | sort)
if ! diff <(echo "$actual") "$list"; then
    echo "FAIL: exports of $lib differ from $list (< actual, > expected)" >&2
    exit 1
fi
if echo "$actual" | grep -qiE '^(ZSTD_|msgpack_|tkp_)'; then
    echo "FAIL: internal symbols exported" >&2
    exit 1
fi
# Only glibc at run time: the shim must load on a host that has nothing of ours.
deps=$(readelf -d "$lib" | sed -n 's/.*NEEDED.*\[\(.*\)\]/\1/p')
for d in $deps; do
    case "$d" in libc.so.*|libdl.so.*|libpthread.so.*|libm.so.*|ld-linux*) ;;
    *) echo "FAIL: $lib needs $d" >&2; exit 1 ;;
    esac
done
echo "exports ok ($(echo "$actual" | wc -l) symbols), NEEDED: $deps"
