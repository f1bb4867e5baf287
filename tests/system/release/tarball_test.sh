#!/usr/bin/env bash
# scripts/package.sh's tarball: its layout, every ELF in it passes check_elf.py (glibc 2.28, only
# glibc NEEDED), and its bin/tokprof runs minillm on the simulated GPU with its own lib/ shim.
# usage: tarball_test.sh SRC WORK MINILLM SIMGPU_DIR
set -euo pipefail
src=$1 work=$2 minillm=$3 simgpu=$4
rm -rf "$work"
mkdir -p "$work"
tgz=$(cd "$src" && BUILD_DIR="$work/build" scripts/package.sh "$work/dist")
echo "tarball: $tgz, $(stat -c %s "$tgz") bytes"
tar -C "$work" -xzf "$tgz"
root=$(ls -d "$work"/tokprof-*-linux-x86_64)
for f in bin/tokprof lib/libtokprof.so lib/libtokprof_decoder.so include/tokprof/tokprof.h \
         include/tokprof/decoder.h share/doc/tokprof/README.md share/doc/tokprof/FORMAT.md; do
    [ -e "$root/$f" ] || { echo "FAIL: $f missing from the tarball"; exit 1; }
done
python3 "$(dirname "$0")/check_elf.py" "$root"
cd "$work"
LD_LIBRARY_PATH="$simgpu" "$root/bin/tokprof" run -o caps -- "$minillm" --steps 4
"$root/bin/tokprof" summary caps | tee summary.txt
grep -q '^tokens  *5 token steps' summary.txt || { echo "FAIL: summary of the run"; exit 1; }
echo "1 passed, 0 failed"
