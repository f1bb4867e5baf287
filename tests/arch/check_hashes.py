#!/usr/bin/env python3
"""One hash, one map, one grower: no hash constant, open-addressing probe loop or realloc() in
decoder/ or shim/ outside the folders that own them (decoder/base/: hash.h, map.h, grow.h;
shim/core/: map.h, grow.h). A clean-up that removed the copies stays done only if a test says
so (docs/ARCHITECTURE.md, "One level up").

Usage: check_hashes.py --root DIR [--allow FILE]

Each line of a .c or .h file (comments and strings blanked) is matched against three rules:
  hash    a constant of FNV-1a (32 and 64 bits), the golden ratio (0x9e3779b9...) or the
          Murmur3 finalisers
  probe   a linear probe: (i + 1) & mask, (h + i) & (N - 1), x & (cap - 1) (a ring's
          (head + i) % cap is not one; a probe written with % is missed)
  realloc a call of realloc()
The allow file names what is left on purpose, as `PATH RULE COUNT  # why`: the shim's lock-free
hot-path tables. A file may hold exactly COUNT lines of RULE; more fails (a copy came back),
fewer fails too (the list must shrink with the code). Exit 0 clean, 1 with one line per fault.
"""
import argparse
import os
import re
import sys

TREES = ("decoder", "shim")
OWNERS = ("decoder/base/", "shim/core/")
RULES = {
    "hash": re.compile(r"0x9e3779b9|0xff51afd7ed558ccd|0xc4ceb9fe1a85ec53|0x85ebca6b|0xc2b2ae35|"
                       r"0xcbf29ce484222325|0x100000001b3|1469598103934665603|1099511628211|"
                       r"2166136261|16777619|0x811c9dc5|0x01000193", re.I),
    "probe": re.compile(r"\(\s*[\w.>\[\]-]+\s*\+\s*(1|[a-z])\s*\)\s*&|"
                        r"&\s*\(\s*[\w.>-]*cap\w*\s*-\s*1\s*\)|[&%]\s*mask\b", re.I),
    "realloc": re.compile(r"\brealloc\s*\("),
}


def code_lines(text):
    """The file's lines with comments and string/char literals blanked (line numbers kept)."""
    out, i, n = [], 0, len(text)
    buf = []
    state = None
    while i < n:
        c = text[i]
        nxt = text[i + 1] if i + 1 < n else ""
        if state is None:
            if c == "/" and nxt == "*":
                state, i = "block", i + 2
                buf.append("  ")
                continue
            if c == "/" and nxt == "/":
                state = "line"
            elif c in "\"'":
                state = c
                buf.append(c)
                i += 1
                continue
        elif state == "block":
            if c == "*" and nxt == "/":
                state, i = None, i + 2
                buf.append("  ")
                continue
            buf.append("\n" if c == "\n" else " ")
            i += 1
            continue
        elif state == "line":
            if c == "\n":
                state = None
            else:
                buf.append(" ")
                i += 1
                continue
        elif state in "\"'":
            if c == "\\":
                buf.append("  ")
                i += 2
                continue
            if c == state:
                state = None
            elif c != "\n":
                buf.append(" ")
                i += 1
                continue
        buf.append(c)
        i += 1
    return "".join(buf).split("\n")


def scan(root):
    found = {}  # (path, rule) -> [line numbers]
    for tree in TREES:
        for d, _, files in os.walk(os.path.join(root, tree)):
            for f in sorted(files):
                if not f.endswith((".c", ".h")):
                    continue
                path = os.path.relpath(os.path.join(d, f), root)
                if path.startswith(OWNERS):
                    continue
                with open(os.path.join(d, f), encoding="utf-8", errors="replace") as fh:
                    lines = code_lines(fh.read())
                for no, line in enumerate(lines, 1):
                    for rule, rx in RULES.items():
                        if rx.search(line):
                            found.setdefault((path, rule), []).append(no)
    return found


def read_allow(path):
    allow = {}
    if not path:
        return allow
    with open(path) as f:
        for no, line in enumerate(f, 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            p, rule, count = line.split()
            allow[(p, rule)] = int(count)
    return allow


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    ap.add_argument("--allow")
    a = ap.parse_args()
    found, allow = scan(a.root), read_allow(a.allow)
    bad = []
    for key in sorted(set(found) | set(allow)):
        path, rule = key
        got, ok = found.get(key, []), allow.get(key, 0)
        if len(got) > ok:
            where = ", ".join(f"{path}:{n}" for n in got)
            bad.append(f"{where}: {rule} outside decoder/base/ and shim/core/ "
                       f"({len(got)} line(s), {ok} allowed): use base/hash.h, base/map.h, "
                       f"base/grow.h (shim: core/)")
        elif len(got) < ok:
            bad.append(f"{path}: {rule}: {ok} allowed but {len(got)} left: lower the count in "
                       f"{os.path.basename(a.allow)}")
    for b in bad:
        print(b)
    if not bad:
        n = sum(allow.values())
        print(f"ok: no hash constant, probe loop or realloc outside decoder/base/ and shim/core/ "
              f"but the {n} allowed")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
