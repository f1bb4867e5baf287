#!/usr/bin/env python3
"""The one-way rule of a source tree (shim/ or decoder/), checked from its sources and its objects.

Usage: check_layers.py --tree TREE [--tree TREE ...] --build BUILD [--root ROOT]

TREE is a folder of the source root (shim, decoder); BUILD the CMake build folder. The tree's
rule is TREE/layers.txt: one line per folder, lowest layer first, "FOLDER [USED_FOLDER ...]".
A folder may always use itself and include/tokprof/ (the public headers); "." names the files
at the tree's root; "*" as a used folder means every folder listed above it. A folder may only
use folders listed above it, so the rule itself has no loop. Files in a subfolder of a listed
folder belong to the longest listed prefix.

Fails (exit 1, one line per fault) on:
  (a) an #include "..." that resolves to a folder the including file's folder may not use, or
      into another top-level tree (shim and decoder share only include/tokprof/);
  (b) with `nm -P` over the tree's objects (BUILD/TREE/**/CMakeFiles/<target>.dir/**.o): any
      reference loop between object files (a strongly connected component of more than one
      object, edges from an undefined symbol to the object defining it) and any reference to an
      object of a folder not allowed;
  (c) a non-static function declared in a header of the tree not named after the file that
      defines it (foo.c's functions belong in foo.h). Exempt by rule: headers under
      include/tokprof/ (they are outside the tree), and the names listed in TREE/exports.txt
      (the shim's interposed entry points carry the API's names and are declared by its headers);
  (d) a file of shim/ or decoder/ named like a header the tree includes with angle brackets
      (decoder/base/elf.h beside #include <elf.h>): the name means two files, one -I folder
      from the wrong one, and a reader or a tool matching names takes the system's for ours.

Exit 0 when clean, 1 on faults, 2 on a usage or setup error (no layers.txt, no objects).
Standard library only; the command line is stable (tests and other branches run it).
"""
import argparse
import os
import re
import subprocess
import sys

# Identifiers followed by "(" in a declaration that are not the declared function's name.
NOT_NAMES = {"__attribute__", "__attribute", "__declspec", "__typeof__", "typeof", "sizeof",
             "_Alignas", "alignof", "_Alignof", "__asm__", "asm", "_Static_assert",
             "static_assert", "__extension__"}


class Layers:
    def __init__(self, path):
        self.order = []  # folders, lowest first
        self.uses = {}
        self.errors = []
        with open(path) as f:
            for n, line in enumerate(f, 1):
                line = line.split("#", 1)[0].split()
                if not line:
                    continue
                folder, used = norm(line[0]), line[1:]
                if folder in self.uses:
                    self.errors.append(f"{path}:{n}: folder {folder} listed twice")
                allowed = set()
                for u in used:
                    if u == "*":
                        allowed.update(self.order)
                        continue
                    u = norm(u)
                    if u not in self.uses:
                        self.errors.append(f"{path}:{n}: {folder} uses {u}, which is not listed "
                                           f"above it (lowest layer first)")
                    allowed.add(u)
                allowed.add(folder)
                self.order.append(folder)
                self.uses[folder] = allowed

    def folder_of(self, relpath):
        """The listed folder a tree-relative file belongs to (longest prefix), or None."""
        d = os.path.dirname(relpath) or "."
        best = None
        for folder in self.order:
            if folder == ".":
                if d == ".":
                    return "."
                continue
            if d == folder or d.startswith(folder + "/"):
                if best is None or len(folder) > len(best):
                    best = folder
        return best

    def may_use(self, a, b):
        return b in self.uses.get(a, ())


def norm(folder):
    folder = folder.strip("/")
    return folder if folder else "."


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def source_files(tree_dir):
    for base, dirs, files in os.walk(tree_dir):
        dirs.sort()
        for name in sorted(files):
            if name.endswith((".c", ".h", ".S", ".def", ".inc")):
                yield os.path.join(base, name)


def check_includes(root, tree, layers, faults):
    tree_dir = os.path.join(root, tree)
    public = os.path.realpath(os.path.join(root, "include"))
    trees = {t for t in os.listdir(root) if os.path.isfile(os.path.join(root, t, "layers.txt"))}
    trees.update({"shim", "decoder"})
    inc = re.compile(r'^[ \t]*#[ \t]*include[ \t]*"([^"]+)"', re.M)
    for path in source_files(tree_dir):
        rel = os.path.relpath(path, tree_dir)
        folder = layers.folder_of(rel)
        if folder is None:
            faults.append(f"{tree}/{rel}: its folder is not listed in {tree}/layers.txt")
            continue
        with open(path, errors="replace") as f:
            text = strip_comments(f.read())
        for m in inc.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            name = m.group(1)
            target = None
            # The compiler's order: the including file's folder, then the -I folders
            # (the tree's root and include/).
            for base in (os.path.dirname(path), tree_dir, os.path.join(root, "include")):
                cand = os.path.realpath(os.path.join(base, name))
                if os.path.isfile(cand):
                    target = cand
                    break
            if target is None:
                continue  # a system or third-party header
            if target.startswith(public + os.sep):
                continue
            trel = os.path.relpath(target, os.path.realpath(tree_dir))
            if trel.startswith(".."):
                other = os.path.relpath(target, os.path.realpath(root)).split(os.sep)[0]
                if other in trees:
                    faults.append(f"{tree}/{rel}:{line}: includes {name}, which is in {other}/ "
                                  f"(trees share only include/tokprof/)")
                continue
            tfolder = layers.folder_of(trel)
            if tfolder is None:
                faults.append(f"{tree}/{rel}:{line}: includes {name}, whose folder is not listed")
            elif not layers.may_use(folder, tfolder):
                faults.append(f"{tree}/{rel}:{line}: includes {trel} ({tfolder}/), which "
                              f"{folder}/ may not use")


def check_system_names(root, tree, faults):
    """(d): every #include <NAME> of the tree against the files of the trees whose path ends
    with /NAME."""
    ours = []
    for t in sorted({"shim", "decoder", tree}):
        if os.path.isdir(os.path.join(root, t)):
            ours += [os.path.relpath(p, root) for p in source_files(os.path.join(root, t))]
    inc = re.compile(r'^[ \t]*#[ \t]*include[ \t]*<([^>]+)>', re.M)
    tree_dir = os.path.join(root, tree)
    for path in source_files(tree_dir):
        with open(path, errors="replace") as f:
            text = strip_comments(f.read())
        for m in inc.finditer(text):
            name = m.group(1)
            same = [o for o in ours if o.endswith("/" + name)]
            if same:
                line = text.count("\n", 0, m.start()) + 1
                faults.append(f"{os.path.relpath(path, root)}:{line}: #include <{name}> is also "
                              f"{', '.join(same)}: a file of ours named like a system header "
                              f"(rename ours)")


def find_objects(build, root, tree):
    """{tree-relative source: object path}, one object per source (the first target's)."""
    tree_build = os.path.join(build, tree)
    objs = {}
    for base, dirs, files in os.walk(tree_build):
        dirs.sort()
        for name in sorted(files):
            if not name.endswith(".o"):
                continue
            path = os.path.join(base, name)
            rel = os.path.relpath(path, tree_build)
            m = re.match(r"^(?:(.*)/)?CMakeFiles/[^/]+\.dir/(.*)\.o$", rel)
            if not m:
                continue
            src = os.path.normpath(os.path.join(m.group(1) or "", m.group(2)))
            if not os.path.isfile(os.path.join(root, tree, src)):
                continue  # generated or out of the tree
            objs.setdefault(src, path)
    return objs


def nm_symbols(obj):
    out = subprocess.run(["nm", "-P", obj], capture_output=True, text=True, check=True).stdout
    defined, undefined = set(), set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) < 2:
            continue
        name, kind = parts[0], parts[1]
        if kind == "U":
            undefined.add(name)
        elif kind in "TDBRVWGSC" and kind.isupper():
            defined.add(name)
    return defined, undefined


def sccs(nodes, edges):
    """Tarjan's strongly connected components, iteratively."""
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = [0]
    for start in nodes:
        if start in index:
            continue
        work = [(start, iter(sorted(edges.get(start, ()))))]
        index[start] = low[start] = counter[0]
        counter[0] += 1
        stack.append(start)
        on.add(start)
        while work:
            v, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges.get(w, ())))))
                    advanced = True
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                out.append(sorted(comp))
    return out


def check_objects(root, build, tree, layers, faults):
    objs = find_objects(build, root, tree)
    if not objs:
        return None
    defs, undefs = {}, {}
    definer = {}
    for src, obj in sorted(objs.items()):
        d, u = nm_symbols(obj)
        defs[src], undefs[src] = d, u
        for name in d:
            definer.setdefault(name, src)
    edges = {}
    why = {}
    for src in sorted(objs):
        for name in sorted(undefs[src]):
            dst = definer.get(name)
            if dst is None or dst == src:
                continue
            edges.setdefault(src, set()).add(dst)
            why.setdefault((src, dst), name)
    for comp in sccs(sorted(objs), edges):
        if len(comp) > 1:
            links = [f"{a} -> {b} ({why[(a, b)]})" for a in comp for b in sorted(edges.get(a, ()))
                     if b in comp]
            faults.append(f"{tree}: reference loop between {len(comp)} objects: " + "; ".join(links))
    for src in sorted(edges):
        a = layers.folder_of(src)
        for dst in sorted(edges[src]):
            b = layers.folder_of(dst)
            if a is None or b is None:
                continue  # reported by the include pass
            if not layers.may_use(a, b):
                faults.append(f"{tree}/{src}: references {why[(src, dst)]} of {tree}/{dst} "
                              f"({b}/), which {a}/ may not use")
    return definer


def header_declarations(text):
    """Names of the non-static functions a header declares at file scope."""
    text = strip_comments(text)
    # Preprocessor lines (with their continuations) are not declarations.
    text = re.sub(r"^[ \t]*#(?:[^\n]*\\\n)*[^\n]*", "", text, flags=re.M)
    text = re.sub(r'extern\s*"C"\s*\{', "", text)
    names = []
    depth = 0
    head = []
    i = 0
    while i < len(text):
        c = text[i]
        if c == "{":
            if depth == 0:
                stmt = "".join(head)
                head = []
                decl_name(stmt, names, definition=True)
            depth += 1
        elif c == "}":
            depth = max(depth - 1, 0)
        elif depth == 0:
            if c == ";":
                decl_name("".join(head), names, definition=False)
                head = []
            else:
                head.append(c)
        i += 1
    return names


def decl_name(stmt, names, definition):
    words = set(re.findall(r"[A-Za-z_]\w*", stmt))
    if words & {"static", "typedef"}:
        return
    if definition and not re.search(r"\)\s*$", stmt.strip()):
        return  # a struct, union, enum or initialiser body
    pdepth = 0
    for m in re.finditer(r"[A-Za-z_]\w*|\(|\)", stmt):
        tok = m.group(0)
        if tok == "(":
            pdepth += 1
        elif tok == ")":
            pdepth -= 1
        elif pdepth == 0 and tok not in NOT_NAMES:
            after = stmt[m.end():].lstrip()
            if after.startswith("("):
                names.append(tok)
                return


def check_declarations(root, tree, definer, faults):
    tree_dir = os.path.join(root, tree)
    exempt = set()
    exports = os.path.join(tree_dir, "exports.txt")
    if os.path.isfile(exports):
        with open(exports) as f:
            exempt = {line.split("@", 1)[0].strip() for line in f if line.strip()}
    for path in source_files(tree_dir):
        if not path.endswith(".h"):
            continue
        rel = os.path.relpath(path, tree_dir)
        with open(path, errors="replace") as f:
            names = header_declarations(f.read())
        for name in names:
            if name in exempt:
                continue
            src = definer.get(name)
            if src is None:
                continue  # defined outside the tree's objects (or nowhere)
            if os.path.splitext(src)[0] != os.path.splitext(rel)[0]:
                want = os.path.splitext(src)[0] + ".h"
                faults.append(f"{tree}/{rel}: declares {name}, defined in {tree}/{src} "
                              f"(declare it in {tree}/{want})")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tree", action="append", required=True, help="shim or decoder (repeatable)")
    ap.add_argument("--build", required=True, help="the CMake build folder")
    ap.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                   "..", ".."), help="the source root")
    args = ap.parse_args()
    root = os.path.abspath(args.root)
    faults, setup = [], []
    for tree in args.tree:
        tree = norm(tree)
        lpath = os.path.join(root, tree, "layers.txt")
        if not os.path.isfile(lpath):
            setup.append(f"{tree}: no {tree}/layers.txt")
            continue
        layers = Layers(lpath)
        faults.extend(layers.errors)
        check_includes(root, tree, layers, faults)
        check_system_names(root, tree, faults)
        definer = check_objects(root, os.path.abspath(args.build), tree, layers, faults)
        if definer is None:
            setup.append(f"{tree}: no objects under {args.build}/{tree}/**/CMakeFiles/*.dir/")
            continue
        check_declarations(root, tree, definer, faults)
    for line in setup:
        print(f"check_layers: {line}", file=sys.stderr)
    for line in faults:
        print(line)
    if setup:
        return 2
    if faults:
        print(f"check_layers: {len(faults)} fault(s)", file=sys.stderr)
        return 1
    print(f"check_layers: {', '.join(args.tree)}: one-way rule holds")
    return 0


if __name__ == "__main__":
    sys.exit(main())
