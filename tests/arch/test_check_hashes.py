#!/usr/bin/env python3
"""check_hashes.py's own test: a mini-tree passes clean, and each planted fault fails it.

Usage: test_check_hashes.py

The mini-tree (a temporary folder) has the owners (decoder/base/, shim/core/), which may hold
hash constants, probe loops and realloc, and a decoder/model/ file that uses them through their
names, with the same words in a comment and a string (ignored). Each plant goes into a fresh
copy, and the checker must exit 1 naming the file, line and rule; an allow file with a count
above what is left fails too.
"""
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
CHECKER = os.path.join(HERE, "check_hashes.py")

CLEAN = {
    "decoder/base/map.c": "static unsigned long h(unsigned long x) { return x * 0x9e3779b97f4a7c15ull; }\n"
                          "int f(int *v, unsigned i, unsigned cap) { while (v[i]) i = (i + 1) & (cap - 1);\n"
                          "  return realloc(v, 8) != 0; }\n",
    "shim/core/map.c": "unsigned long fnv = 1469598103934665603ull;\n",
    "decoder/model/use.c": "/* no 0x9e3779b97f4a7c15, no (i + 1) & mask, no realloc() here */\n"
                           "#include \"base/map.h\"\n"
                           "const char *s = \"realloc( 1099511628211\";\n"
                           "int g(struct ring *r, unsigned h) { return r->slots[(h + 4) & r->mask]; }\n"
                           "int q(unsigned head, unsigned cap) { return (head + 1) % cap; }\n",
    "shim/hooks/ok.c": "int k(void) { return 2; }\n",
}

# name: (file, text, what the output must contain)
PLANTS = {
    "hash_constant": ("decoder/model/use.c", "unsigned long mix(unsigned long x) { return x * 0xff51afd7ed558ccdull; }\n",
                      "decoder/model/use.c:6: hash outside"),
    "fnv_prime": ("shim/hooks/ok.c", "unsigned long p = 0x100000001B3ull;\n", "shim/hooks/ok.c:2: hash outside"),
    "probe_loop": ("decoder/model/use.c", "int p(int *v, unsigned j, unsigned cap) { while (v[j]) j = (j + 1) & (cap - 1); return j; }\n",
                   "decoder/model/use.c:6: probe outside"),
    "probe_shim_style": ("shim/hooks/ok.c", "int t(int *s, unsigned h, unsigned i) { return s[(h + i) & (64 - 1)]; }\n",
                         "shim/hooks/ok.c:2: probe outside"),
    "realloc": ("decoder/model/use.c", "void *r(void *p) { return realloc(p, 16); }\n",
                "decoder/model/use.c:6: realloc outside"),
}


def run(root, allow=None):
    cmd = [sys.executable, CHECKER, "--root", root] + (["--allow", allow] if allow else [])
    p = subprocess.run(cmd, capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


def tree(base, extra=None):
    d = tempfile.mkdtemp(dir=base)
    for path, text in CLEAN.items():
        os.makedirs(os.path.dirname(os.path.join(d, path)), exist_ok=True)
        with open(os.path.join(d, path), "w") as f:
            f.write(text)
    if extra:
        path, text = extra
        with open(os.path.join(d, path), "a") as f:
            f.write(text)
    return d


def main():
    base = tempfile.mkdtemp()
    fails = []
    try:
        rc, out = run(tree(base))
        if rc != 0:
            fails.append(f"clean tree: exit {rc}\n{out}")
        for name, (path, text, want) in PLANTS.items():
            rc, out = run(tree(base, (path, text)))
            if rc != 1 or want not in out:
                fails.append(f"{name}: want exit 1 and '{want}', got exit {rc}:\n{out}")
        # an allowed count above what is left: the list must shrink with the code
        d = tree(base)
        allow = os.path.join(d, "allow.txt")
        with open(allow, "w") as f:
            f.write("decoder/model/use.c realloc 1  # removed already\n")
        rc, out = run(d, allow)
        if rc != 1 or "1 allowed but 0 left" not in out:
            fails.append(f"stale allow entry: exit {rc}:\n{out}")
        # an allowed one passes
        d = tree(base, PLANTS["realloc"][:2])
        with open(os.path.join(d, "allow.txt"), "w") as f:
            f.write("decoder/model/use.c realloc 1  # on purpose\n")
        rc, out = run(d, os.path.join(d, "allow.txt"))
        if rc != 0:
            fails.append(f"allowed realloc: exit {rc}:\n{out}")
    finally:
        shutil.rmtree(base)
    for f in fails:
        print("FAIL", f)
    print(f"{len(PLANTS) + 3 - len(fails)} passed, {len(fails)} failed")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
