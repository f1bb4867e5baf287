#!/usr/bin/env python3
"""Behaviour unchanged by a restructuring: the CLI's outputs on checked-in captures, byte for byte.

Usage: outputs_stable.py --tokprof TOKPROF --data DIR --spec DIR [--update]

For every capture DIR/NAME.tokprof it runs `dump --raw`, `summary --json` and `check --json`
with every spec of SPEC/{pass,fail,inconclusive,styles}/ (fail/baseline.tks with --baseline vllm.tokprof), from
DIR with relative paths, and compares stdout, stderr and the exit status with DIR/NAME.expected.xz (xz-compressed: the
dumps are large and repetitive).
The expected files were written by the binary of commit 45becb7 (before the decoder was put
in folders); --update rewrites them, which is only right for a deliberate change of an output
(say which in the commit). Exit 0 when every output matches, 1 otherwise (a unified diff of the
first lines that differ).
"""
import argparse
import difflib
import glob
import lzma
import os
import subprocess
import sys


def commands(spec_dir):
    yield ["dump", "--raw"]
    yield ["summary", "--json"]
    for sub in ("pass", "fail", "inconclusive", "styles"):
        for spec in sorted(glob.glob(os.path.join(spec_dir, sub, "*.tks"))):
            rel = f"{sub}/{os.path.basename(spec)}"
            extra = ["--baseline", "vllm.tokprof"] if rel == "fail/baseline.tks" else []
            yield ["check", "--json", *extra, (rel, spec)]


def run_all(tokprof, data, spec_dir, capture):
    out = []
    for cmd in commands(spec_dir):
        shown = [c[0] if isinstance(c, tuple) else c for c in cmd]
        argv = [c[1] if isinstance(c, tuple) else c for c in cmd]
        p = subprocess.run([tokprof, *argv, capture], cwd=data, capture_output=True, timeout=120)
        out.append(f"$ tokprof {' '.join(shown)} {capture}\n".encode())
        out.append(p.stdout)
        if p.stderr:
            out.append(b"[stderr]\n" + p.stderr)
        out.append(f"[exit {p.returncode}]\n".encode())
    return b"".join(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokprof", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--spec", required=True)
    ap.add_argument("--update", action="store_true")
    a = ap.parse_args()
    tokprof = os.path.abspath(a.tokprof)
    caps = sorted(os.path.basename(p) for p in glob.glob(os.path.join(a.data, "*.tokprof")))
    if not caps:
        print(f"no captures in {a.data}")
        return 1
    bad = 0
    for cap in caps:
        got = run_all(tokprof, a.data, os.path.abspath(a.spec), cap)
        exp_path = os.path.join(a.data, cap[:-len(".tokprof")] + ".expected.xz")
        if a.update:
            with open(exp_path, "wb") as f:
                f.write(lzma.compress(got, preset=9))
            print(f"wrote {exp_path}")
            continue
        try:
            with open(exp_path, "rb") as f:
                want = lzma.decompress(f.read())
        except FileNotFoundError:
            print(f"FAIL {cap}: no {exp_path}")
            bad += 1
            continue
        if got == want:
            print(f"ok   {cap}")
            continue
        bad += 1
        print(f"FAIL {cap}: output differs from {exp_path}")
        diff = difflib.unified_diff(want.decode(errors="replace").splitlines(),
                                    got.decode(errors="replace").splitlines(),
                                    "expected", "got", lineterm="", n=1)
        for i, line in enumerate(diff):
            if i == 40:
                print("...")
                break
            print(line)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
