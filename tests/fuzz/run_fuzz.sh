#!/usr/bin/env bash
# Builds tests/fuzz/fuzz_$FUZZ_TARGET.c (reader unless set: reader, spec) with clang's libFuzzer (+ASan+UBSan) into build-fuzz/ and,
# with arguments, runs it: the arguments go to libFuzzer (e.g. -max_total_time=20).
#   tests/fuzz/run_fuzz.sh --build-only        build, or exit 77 when clang has no libFuzzer
#   tests/fuzz/run_fuzz.sh -max_total_time=1800 -jobs=1
# New inputs go to build-fuzz/corpus-TARGET (seeded from tests/fuzz/corpus/TARGET, as checked in);
# crashes to ./crash-*: add each fixed one to tests/fuzz/corpus/TARGET.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${FUZZ_DIR:-build-fuzz}
CC=${FUZZ_CC:-clang}
command -v "$CC" >/dev/null || { echo "run_fuzz: no $CC" >&2; exit 77; }
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
printf '#include <stddef.h>\n#include <stdint.h>\nint LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }\n' >"$probe/p.c"
"$CC" -fsanitize=fuzzer "$probe/p.c" -o "$probe/p" 2>/dev/null ||
    { echo "run_fuzz: $CC cannot link -fsanitize=fuzzer (install libclang-rt-14-dev)" >&2; exit 77; }

# the decoder library's sources: every folder's, all but main.c and the curses screen of top
srcs=$(find decoder -mindepth 2 -name '*.c' ! -path decoder/cmd/top.c | sort)
zstd=$(find /usr/lib /usr/local/lib -name libzstd.a 2>/dev/null | head -1)
msgpack=$(find /usr/lib /usr/local/lib \( -name libmsgpackc.a -o -name libmsgpack-c.a \) 2>/dev/null | head -1)
stdcxx=$(gcc -print-file-name=libstdc++.a)
TARGET=${FUZZ_TARGET:-reader} # fuzz_$TARGET.c, corpus/$TARGET/
bin="$OUT/fuzz_$TARGET"
mkdir -p "$OUT"
if [ ! -x "$bin" ] || [ -n "$(find decoder include "tests/fuzz/fuzz_$TARGET.c" -newer "$bin" -name '*.[ch]' | head -1)" ]; then
    # each source compiled on its own, as many at once as there are cores (the sanitizers make
    # this the slow part), then linked
    flags="-std=gnu11 -g -O1 -D_GNU_SOURCE -DTKP_LIBFUZZER -fno-omit-frame-pointer -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -Iinclude -Idecoder"
    objdir="$OUT/obj-$TARGET"
    rm -rf "$objdir"
    mkdir -p "$objdir"
    # shellcheck disable=SC2086
    printf '%s\n' "tests/fuzz/fuzz_$TARGET.c" $srcs |
        CC="$CC" FLAGS="$flags" OBJ="$objdir" xargs -P "$(nproc)" -I{} sh -c \
            'exec $CC $FLAGS -c "$1" -o "$OBJ/$(printf %s "$1" | tr / _).o"' _ {}
    # shellcheck disable=SC2086
    "$CC" -fsanitize=fuzzer,address,undefined "$objdir"/*.o "$zstd" "$msgpack" "$stdcxx" -lm -lz \
        -o "$bin"
fi
[ "${1:-}" = "--build-only" ] && exit 0
mkdir -p "$OUT/corpus-$TARGET"
exec "$bin" -rss_limit_mb=1024 -timeout=10 "$@" "$OUT/corpus-$TARGET" "tests/fuzz/corpus/$TARGET"
