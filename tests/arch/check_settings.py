#!/usr/bin/env python3
"""The shim reads its settings in one place (shim/core/config.c, issue 33).

Usage: check_settings.py [--root ROOT]

Fails (exit 1, one line per fault) on:
  (a) a call of getenv, secure_getenv or __secure_getenv anywhere in shim/ but core/config.c, or
      more than one there (the table's loop reads every variable through that one call);
  (b) a call of regcomp in shim/ outside core/config.c: a regex is compiled when the settings are
      read, under init.c's once, never lazily on an application thread (the race of issue 33).
Comments are ignored. Standard library only."""
import argparse
import os
import re
import sys

CALL = re.compile(r"\b(getenv|secure_getenv|__secure_getenv|regcomp)\s*\(")
COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", default=os.path.join(os.path.dirname(__file__), "..", ".."))
    root = os.path.abspath(ap.parse_args().root)
    shim = os.path.join(root, "shim")
    faults, reads = [], 0
    for d, _, files in os.walk(shim):
        for f in sorted(files):
            if not f.endswith((".c", ".h")):
                continue
            path = os.path.join(d, f)
            rel = os.path.relpath(path, root)
            text = COMMENT.sub(lambda m: "\n" * m.group(0).count("\n"), open(path).read())
            for m in CALL.finditer(text):
                line = text.count("\n", 0, m.start()) + 1
                if rel == "shim/core/config.c":
                    reads += m.group(1) != "regcomp"
                    continue
                what = ("a regex compiled outside the settings" if m.group(1) == "regcomp" else
                        "the environment read outside the settings table")
                faults.append(f"{rel}:{line}: {m.group(1)}(): {what} (shim/core/config.c)")
    if reads != 1:
        faults.append(f"shim/core/config.c: {reads} environment reads, want the table's one")
    for f in faults:
        print(f)
    return 1 if faults else 0


if __name__ == "__main__":
    sys.exit(main())
