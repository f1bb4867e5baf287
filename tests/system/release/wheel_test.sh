#!/usr/bin/env bash
# The release wheel, end to end (docs/RELEASE.md): `pip wheel .` (the glibc 2.28 toolchain),
# auditwheel (a manylinux_2_28 or older tag), installed into a fresh venv; then, from that venv
# only — nothing of the source or build tree on PATH or PYTHONPATH — `tokprof run` minillm on the
# simulated GPU, `tokprof summary` of the capture, `python -m tokprof`, and `import tokprof`
# reading it as Arrow; and every ELF the wheel installed passes check_elf.py.
# usage: wheel_test.sh SRC WORK PYENV MINILLM SIMGPU_DIR
set -euo pipefail
src=$1 work=$2 pyenv=$3 minillm=$4 simgpu=$5
rm -rf "$work"
mkdir -p "$work/dist" "$work/run"
step() { echo "== $*"; }

step "pip wheel ."
(cd "$src" && "$pyenv/bin/pip" wheel . --no-build-isolation --no-deps -q -w "$work/dist")
whl=$(ls "$work"/dist/tokprof-*.whl)
step "auditwheel show $(basename "$whl")"
PATH="$pyenv/bin:$PATH" auditwheel show "$whl" | tee "$work/show.txt"
grep -Eq 'platform tag: "manylinux_2_(1[0-9]|2[0-8])_x86_64"' "$work/show.txt" ||
    { echo "FAIL: the wheel is not manylinux_2_28 or older"; exit 1; }
PATH="$pyenv/bin:$PATH" auditwheel repair --plat manylinux_2_28_x86_64 -w "$work/repaired" "$whl" 2>&1 | tail -1
whl=$(ls "$work"/repaired/tokprof-*manylinux_2_28_x86_64*.whl)
echo "wheel: $(basename "$whl"), $(stat -c %s "$whl") bytes"

step "a fresh venv"
python3 -m venv "$work/venv"
"$work/venv/bin/pip" install -q --disable-pip-version-check --no-index \
    --find-links "$pyenv/wheels" "$whl" pyarrow
site=$("$work/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')

step "check_elf on what the wheel installed"
python3 "$(dirname "$0")/check_elf.py" "$site/tokprof"

step "tokprof from the venv only"
cd "$work/run"
clean=(env -i "HOME=$HOME" "PATH=$work/venv/bin:/usr/bin:/bin" "LANG=C.UTF-8")
[ "$("${clean[@]}" sh -c 'command -v tokprof')" = "$work/venv/bin/tokprof" ] ||
    { echo "FAIL: tokprof is not the venv's"; exit 1; }
# the simulated GPU is the target program's environment, not tokprof's
"${clean[@]}" LD_LIBRARY_PATH="$simgpu" tokprof run -o caps -- "$minillm" --steps 8  # 1 prefill + 8
"${clean[@]}" tokprof summary caps | tee summary.txt
grep -q '^tokens  *9 token steps' summary.txt ||
    { echo "FAIL: summary does not show the run's token steps"; exit 1; }
"${clean[@]}" python -m tokprof version | grep -q '^tokprof 0\.' || { echo "FAIL: python -m tokprof"; exit 1; }
"${clean[@]}" python - "$work/venv" <<'PY'
import sys, tokprof
venv = sys.argv[1]
assert tokprof.__file__.startswith(venv), tokprof.__file__
cap = tokprof.open("caps")
steps = cap.steps()
tokens = [s for s in steps.column("kind").to_pylist() if s == "token"]
assert len(tokens) >= 8, steps
assert cap.summary()["tokens"] > 0
print(f"import tokprof: {tokprof.__file__}; {steps.num_rows} steps, {len(tokens)} token steps")
PY
echo "1 passed, 0 failed"
