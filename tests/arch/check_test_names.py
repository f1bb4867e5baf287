#!/usr/bin/env python3
"""Every ctest name carries its tier: a test registered under tests/<tier>/ (any depth) is named
<tier>_... (issue 33). Tests registered anywhere else (tests/CMakeLists.txt itself, shim/,
decoder/, the top level) have no tier and fail too.

Usage: check_test_names.py --ctest CTEST --build BUILD --src SRC

Reads `ctest --show-only=json-v1` in BUILD (what ctest itself would run, loops and conditions
already expanded); where a test was registered is the CMakeLists.txt at the root of its
add_test backtrace (the directory's own list file, even when a function defined elsewhere made
the call). One line per fault, exit 1; exit 0 with a count when all are right. Standard library
only."""
import argparse
import json
import os
import subprocess
import sys


def registered_in(graph, node):
    nodes = graph["nodes"]
    while "parent" in nodes[node]:
        node = nodes[node]["parent"]
    return graph["files"][nodes[node]["file"]]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ctest", default="ctest")
    ap.add_argument("--build", required=True)
    ap.add_argument("--src", required=True)
    a = ap.parse_args()
    out = subprocess.run([a.ctest, "--show-only=json-v1"], cwd=a.build, capture_output=True,
                         text=True)
    if out.returncode != 0:
        print(f"check_test_names: ctest --show-only=json-v1 failed in {a.build}: "
              f"{out.stderr.strip()}")
        return 2
    d = json.loads(out.stdout)
    tests_dir = os.path.realpath(os.path.join(a.src, "tests"))
    faults, per_tier = [], {}
    for t in d["tests"]:
        where = os.path.realpath(registered_in(d["backtraceGraph"], t["backtrace"]))
        rel = os.path.relpath(where, tests_dir).split(os.sep)
        if rel[0] == ".." or len(rel) < 2:
            faults.append(f"{t['name']}: registered in {os.path.relpath(where, a.src)}, "
                          "outside a tier folder tests/<tier>/")
            continue
        tier = rel[0]
        per_tier[tier] = per_tier.get(tier, 0) + 1
        if not t["name"].startswith(tier + "_"):
            faults.append(f"{t['name']}: registered in tests/{'/'.join(rel)}, so its name must "
                          f"start with {tier}_")
    for f in faults:
        print(f)
    if faults:
        print(f"check_test_names: {len(faults)} of {len(d['tests'])} tests not named by tier")
        return 1
    print(f"check_test_names: {len(d['tests'])} tests, each named by its tier: " +
          ", ".join(f"{k} {v}" for k, v in sorted(per_tier.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
