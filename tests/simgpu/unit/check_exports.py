#!/usr/bin/env python3
"""The fakes export what real clients import: every undefined symbol (name and version node) that
the installed torch wheel's libraries -- and the wheel's NVIDIA libraries that link against the
faked SONAMEs (cuSOLVER, cuSPARSE, ...) -- import from a faked library is defined by the fake.

    check_exports.py FAKE_DIR VENV

Exit 0 when all are there, 1 with the missing ones listed, 77 (ctest's skip) with one line when
VENV has no torch (the cached venv of scripts/setup.sh was not created)."""
import glob
import os
import subprocess
import sys

FAKES = ["libcuda.so.1", "libcudart.so.13", "libcublas.so.13", "libcublasLt.so.13", "libcudnn.so.9",
         "libcupti.so.13"]


def dynsyms(path, defined):
    flag = "--defined-only" if defined else "--undefined-only"
    out = subprocess.run(["nm", "-D", flag, path], capture_output=True, text=True, check=True).stdout
    syms = set()
    for line in out.splitlines():
        sym = line.split()[-1]
        name, _, ver = sym.replace("@@", "@").partition("@")
        syms.add((name, ver))
    return syms


def needed(path):
    out = subprocess.run(["readelf", "-d", "--wide", path], capture_output=True, text=True).stdout
    return [l.split("[")[1].split("]")[0] for l in out.splitlines() if "(NEEDED)" in l]


def main():
    fake_dir, venv = sys.argv[1], sys.argv[2]
    sites = glob.glob(os.path.join(venv, "lib", "python3*", "site-packages", "torch", "lib"))
    if not sites:
        print(f"SKIP: no torch in {venv} (scripts/setup.sh creates the venv)")
        return 77
    site = os.path.dirname(os.path.dirname(sites[0]))
    exports = {f: dynsyms(os.path.join(fake_dir, f), True) for f in FAKES}
    clients = glob.glob(os.path.join(site, "torch", "lib", "*.so*")) + glob.glob(os.path.join(site, "torch", "*.so"))
    clients += glob.glob(os.path.join(site, "nvidia", "*", "lib", "*.so*"))
    missing, checked, nclients = [], 0, 0
    for c in sorted(clients):
        if os.path.basename(c) in FAKES:
            continue  # the libraries the fakes replace
        faked = [n for n in needed(c) if n in exports]
        if not faked:
            continue
        nclients += 1
        undef = dynsyms(c, False)
        for name, ver in sorted(undef):
            if ver not in FAKES and not any(name.startswith(p) for p in ("cu", "__cuda")):
                continue
            owners = [f for f in faked if (ver and ver == f) or (not ver and f == "libcuda.so.1")]
            if not owners:
                continue
            checked += 1
            if not any((name, ver) in exports[f] for f in owners):
                missing.append(f"{os.path.relpath(c, site)}: {name}@{ver}")
    for m in missing:
        print("missing:", m)
    print(f"{checked} imports of {nclients} libraries checked, {len(missing)} missing")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
