#!/usr/bin/env python3
"""The checker's own test: a synthetic mini-tree passes clean, and each planted fault fails it.

Usage: test_check_layers.py [CC]

The mini-tree (in a temporary folder) has two layers, base/ and top/, and a root file; its
objects are compiled with CC (default cc) into the same layout CMake uses
(BUILD/mini/CMakeFiles/<target>.dir/<source>.o). Each plant is applied to a fresh copy, and the
checker must exit 1 with the fault's own message: an upward include, an upward call (with no
include to give it away), a call loop between two objects of one folder, a function declared
in a header not named after its defining file, a file named like a system header the tree
includes, and a layers.txt that lists a folder using one above it.
"""
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
CHECKER = os.path.join(HERE, "check_layers.py")
CC = sys.argv[1] if len(sys.argv) > 1 else "cc"

CLEAN = {
    "layers.txt": "# lowest first\nbase\ntop base\n. *\n",
    "base/a.h": "int tkp_a(int x);\n",
    "base/a.c": '#include "base/a.h"\n#include "base/c.h"\nint tkp_a(int x) { return tkp_c(x) + 1; }\n',
    "base/c.h": "int tkp_c(int x);\n",
    "base/c.c": '#include "base/c.h"\nint tkp_c(int x) { return x * 2; }\n',
    "top/b.h": "/* top/ may use base/ */\nint tkp_b(void);\n",
    "top/b.c": '#include "top/b.h"\n#include "base/a.h"\nint tkp_b(void) { return tkp_a(3); }\n',
    "main.c": '#include "top/b.h"\nint main(void) { return tkp_b() == 7 ? 0 : 1; }\n',
}

# name: (files to replace, text the checker's output must contain)
PLANTS = {
    "upward_include": (
        {"base/c.c": '#include "base/c.h"\n#include "top/b.h"\nint tkp_c(int x) { return x * 2; }\n'},
        "base/c.c:2: includes top/b.h (top/), which base/ may not use"),
    "upward_call": (
        {"base/c.c": '#include "base/c.h"\nint tkp_b(void);\n'
                     'int tkp_c(int x) { return x ? x * 2 : tkp_b(); }\n'},
        "base/c.c: references tkp_b of mini/top/b.c (top/), which base/ may not use"),
    "call_loop": (
        {"base/c.c": '#include "base/c.h"\n#include "base/a.h"\n'
                     'int tkp_c(int x) { return x > 9 ? tkp_a(x - 9) : x * 2; }\n'},
        "reference loop between 2 objects: base/a.c -> base/c.c (tkp_c); base/c.c -> base/a.c (tkp_a)"),
    "misplaced_declaration": (
        {"base/a.h": "int tkp_a(int x);\nint tkp_c(int x);\n",
         "base/a.c": '#include "base/a.h"\nint tkp_a(int x) { return tkp_c(x) + 1; }\n'},
        "base/a.h: declares tkp_c, defined in mini/base/c.c (declare it in mini/base/c.h)"),
    "system_header_name": (
        {"base/limits.h": "/* ours, named like the system's */\n",
         "top/b.c": '#include <limits.h>\n#include "top/b.h"\n#include "base/a.h"\n'
                    'int tkp_b(void) { return tkp_a(3) + (INT_MAX < 0); }\n'},
        "top/b.c:1: #include <limits.h> is also mini/base/limits.h"),
    "layers_upside_down": (
        {"layers.txt": "base top\ntop base\n. *\n"},
        "base uses top, which is not listed above it"),
}


def build(root, files):
    tree = os.path.join(root, "mini")
    for rel, text in files.items():
        path = os.path.join(tree, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)
    objdir = os.path.join(root, "build", "mini", "CMakeFiles", "mini.dir")
    for rel in files:
        if not rel.endswith(".c"):
            continue
        obj = os.path.join(objdir, rel + ".o")
        os.makedirs(os.path.dirname(obj), exist_ok=True)
        subprocess.run([CC, "-c", "-I", tree, "-o", obj, os.path.join(tree, rel)], check=True)


def check(root):
    r = subprocess.run([sys.executable, CHECKER, "--root", root, "--tree", "mini",
                        "--build", os.path.join(root, "build")], capture_output=True, text=True)
    return r.returncode, r.stdout + r.stderr


def main():
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        clean = os.path.join(tmp, "clean")
        build(clean, CLEAN)
        rc, out = check(clean)
        if rc != 0:
            print(f"FAIL clean: exit {rc}\n{out}")
            failures += 1
        else:
            print("ok   clean mini-tree passes")
        for name, (changes, want) in PLANTS.items():
            root = os.path.join(tmp, name)
            build(root, {**CLEAN, **changes})
            rc, out = check(root)
            if rc == 1 and want in out:
                print(f"ok   {name}: caught")
            else:
                print(f"FAIL {name}: exit {rc}, wanted 1 and {want!r}\n{out}")
                failures += 1
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
