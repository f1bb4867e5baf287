#!/usr/bin/env python3
"""Checks that shipped ELF files load on glibc 2.28 and need nothing but glibc.

usage: check_elf.py [--max 2.28] PATH...   (files, or directories searched for ELF files)

For each ELF: the version needs (`readelf -V`, section .gnu.version_r) must name no GLIBC_x.y
newer than --max, and every NEEDED library (`readelf -d`) must be one of glibc's own. Version
*definitions* are not needs: the shim defines dlsym@GLIBC_2.34 to interpose glibc's, which binds
nothing on an older glibc. Prints one line per file; exit 1 on any violation, 2 when no ELF was
found (a packaging test that checked nothing must not pass).
"""
import os
import re
import subprocess
import sys

GLIBC_LIBS = {"libc.so.6", "libm.so.6", "libdl.so.2", "libpthread.so.0", "librt.so.1",
              "ld-linux-x86-64.so.2", "libutil.so.1", "libresolv.so.2"}


def is_elf(path):
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"\x7fELF"
    except OSError:
        return False


def readelf(args, path):
    return subprocess.run(["readelf", "-W", *args, path], check=True, stdout=subprocess.PIPE,
                          text=True).stdout


def version_needs(path):
    """{(library, version)} of the .gnu.version_r section."""
    out, needs, lib, inside = readelf(["-V"], path), set(), None, False
    for line in out.splitlines():
        if line.startswith("Version needs section"):
            inside = True
            continue
        if inside and line and not line.startswith(" "):
            inside = False
        if not inside:
            continue
        m = re.search(r"File: (\S+)", line)
        if m:
            lib = m.group(1)
            continue
        m = re.search(r"Name: (\S+)", line)
        if m:
            needs.add((lib, m.group(1)))
    return needs


def needed(path):
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", readelf(["-d"], path))


def vkey(v):
    return tuple(int(x) for x in v.split("."))


def main(argv):
    floor = "2.28"
    if argv[:1] == ["--max"]:
        floor, argv = argv[1], argv[2:]
    files = []
    for p in argv:
        if os.path.isdir(p):
            for d, _, names in os.walk(p):
                files += [os.path.join(d, n) for n in sorted(names)
                          if not os.path.islink(os.path.join(d, n)) and is_elf(os.path.join(d, n))]
        elif is_elf(p):
            files.append(p)
        else:
            print(f"check_elf: {p}: not an ELF file")
            return 1
    if not files:
        print("check_elf: no ELF file found in " + " ".join(argv))
        return 2
    bad = 0
    for f in files:
        problems = []
        newest = "0"
        for lib, ver in sorted(version_needs(f)):
            m = re.fullmatch(r"GLIBC_(\d+(?:\.\d+)*)", ver)
            if not m:
                continue
            if vkey(m.group(1)) > vkey(newest):
                newest = m.group(1)
            if vkey(m.group(1)) > vkey(floor):
                problems.append(f"needs {ver} ({lib})")
        for lib in needed(f):
            if lib not in GLIBC_LIBS:
                problems.append(f"NEEDED {lib} is not glibc's")
        print(f"{'BAD' if problems else 'ok '} {f}: newest GLIBC_{newest}"
              + ("; " + "; ".join(problems) if problems else ""))
        bad += bool(problems)
    print(f"{len(files) - bad} passed, {bad} failed")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
