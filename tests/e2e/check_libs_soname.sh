#!/usr/bin/env bash
# Usage: check_libs_soname.sh FAKE REAL [FAKE REAL ...]
# For each pair: same SONAME, same version-definition node names, DT_FLAGS SYMBOLIC like the real
# one, no NEEDED libcuda / libcudart (the real math libraries reach the driver with dlopen), and
# every symbol the fake exports is exported by the real library under the same version node.
set -u
fail=0
err() { echo "FAIL: $*"; fail=1; }
while [ $# -ge 2 ]; do
  fake=$1 real=$2; shift 2
  [ -f "$fake" ] || { err "$fake missing"; continue; }
  [ -f "$real" ] || { echo "skip: $real missing"; continue; }
  sf=$(readelf -d "$fake" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')
  sr=$(readelf -d "$real" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')
  [ "$sf" = "$sr" ] || err "$fake: SONAME '$sf', real '$sr'"
  vf=$(readelf -V "$fake" | sed -n '/Version definition/,/Version needs/p' | grep -o 'Name: .*' | sort -u)
  vr=$(readelf -V "$real" | sed -n '/Version definition/,/Version needs/p' | grep -o 'Name: .*' | sort -u)
  [ "$vf" = "$vr" ] || err "$fake: version nodes '$vf', real '$vr'"
  if readelf -d "$real" | grep -q SYMBOLIC && ! readelf -d "$fake" | grep -q SYMBOLIC; then
    err "$fake: not linked -Bsymbolic like $real"
  fi
  if readelf -d "$fake" | grep NEEDED | grep -Eq 'libcuda\.so|libcudart\.so'; then
    err "$fake: links libcuda/libcudart"
  fi
  missing=$(comm -23 <(nm -D --defined-only "$fake" | awk '$2 ~ /[TW]/ {print $3}' | sort -u) \
                     <(nm -D --defined-only "$real" | awk '$2 ~ /[TW]/ {print $3}' | sort -u))
  [ -z "$missing" ] || err "$fake exports symbols the real library lacks: $(echo $missing)"
  [ $fail = 0 ] && echo "ok: $fake ($sf, $(nm -D --defined-only "$fake" | grep -c ' T ') functions)"
done
exit $fail
