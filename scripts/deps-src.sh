#!/usr/bin/env bash
# Fetches and unpacks the sources of zstd, msgpack-c and zlib for the release build (cmake/deps.cmake):
# Debian's source packages (the same versions the default build links), by apt-get source with
# deb-src entries derived from this machine's own apt sources, in a private apt state so the
# system's configuration is left as it is. Usage: scripts/deps-src.sh DIR (default .deps);
# idempotent: does nothing when DIR already has both.
set -euo pipefail
dir=${1:-.deps}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
have() { compgen -G "$dir/$1" >/dev/null; }
if have 'libzstd-*/lib/zstd.h' && have 'msgpack-c-*/src/unpack.c' && have 'zlib-*/inflate.c'; then exit 0; fi

state="$dir/.apt"
mkdir -p "$state/lists/partial" "$state/parts"
# deb-src twins of the configured deb sources (deb822 .sources files and one-line lists)
for f in /etc/apt/sources.list.d/*.sources; do
    [ -e "$f" ] || continue
    sed -e 's/^Types:.*deb\b.*/Types: deb-src/' "$f" > "$state/parts/$(basename "$f")"
done
: > "$state/sources.list"
for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -e "$f" ] || continue
    sed -n 's/^deb \(.*\)/deb-src \1/p' "$f" >> "$state/sources.list"
done
apt_opts=(-o "Dir::Etc::SourceList=$state/sources.list" -o "Dir::Etc::SourceParts=$state/parts"
          -o "Dir::State::Lists=$state/lists" -o Dir::Cache::pkgcache= -o Dir::Cache::srcpkgcache=
          -o APT::Sandbox::User=root)
cd "$dir"
# A mirror may serve the security suite's binaries but not its sources: then the main suite's.
if ! { apt-get -qq "${apt_opts[@]}" update && \
       apt-get -qq "${apt_opts[@]}" source --download-only libzstd msgpack-c zlib; } 2>"$state/err"; then
    echo "deps-src: $(grep -m1 '^E:' "$state/err" || tail -1 "$state/err"); trying without the security suite" >&2
    for f in "$state"/parts/*.sources; do
        [ -e "$f" ] || continue
        awk 'BEGIN{RS=""; ORS="\n\n"} !/security/' "$f" > "$f.tmp" && mv "$f.tmp" "$f"
    done
    sed -i '/security/d' "$state/sources.list"
    rm -f ./*.dsc ./*.tar.* ./*.asc
    apt-get -qq "${apt_opts[@]}" update
    apt-get -qq "${apt_opts[@]}" source --download-only libzstd msgpack-c zlib
fi
for dsc in libzstd_*.dsc msgpack-c_*.dsc zlib_*.dsc; do
    pkgdir=$(sed -n 's/^Source: //p' "$dsc")-$(sed -n 's/^Version: \(.*:\)\{0,1\}\([^-]*\).*/\2/p' "$dsc")
    rm -rf "$pkgdir"
    dpkg-source -q --no-check -x "$dsc" "$pkgdir" >/dev/null
done
have 'libzstd-*/lib/zstd.h' && have 'msgpack-c-*/src/unpack.c' && have 'zlib-*/inflate.c' || {
    echo "deps-src: no zstd, msgpack-c or zlib sources unpacked in $dir" >&2; exit 1; }
