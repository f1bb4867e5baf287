#!/usr/bin/env python3
"""A throw-away view of the cached torch venv whose NVIDIA runtime libraries are simgpu's fakes.

    overlay.py VENV FAKE_DIR OUT      (prints OUT/bin/python)

PyTorch's libraries find libcudart/libcublas/libcublasLt/libcudnn/libcupti through DT_RPATH
($ORIGIN/../../nvidia/*/lib), which wins over LD_LIBRARY_PATH, so the fakes cannot be put first
by the environment. The venv itself is never modified (other worktrees and builds share it):
OUT is a venv of symlinks -- OUT/bin/python, pyvenv.cfg, and a site-packages whose entries are
symlinks to the venv's, except the folders on the RPATH's way (torch/, torch/lib/, nvidia/*/lib/),
which are real folders of symlinks. glibc takes $ORIGIN from the path a library was opened by,
not from its target, so torch/lib/libtorch_cuda.so (a symlink) looks in OUT's nvidia/*/lib,
where the faked names point at FAKE_DIR. It costs a few hundred symlinks, about 50 ms."""
import glob
import os
import sys

FAKED = {"libcudart.so.13", "libcublas.so.13", "libcublasLt.so.13", "libcudnn.so.9", "libcupti.so.13"}


def link_all(src, dst, deep):
    """dst/ gets a symlink per entry of src/, but for the entries deep names (real folders)."""
    os.makedirs(dst, exist_ok=True)
    for name in os.listdir(src):
        if name in deep:
            deep[name](os.path.join(src, name), os.path.join(dst, name))
        else:
            os.symlink(os.path.join(src, name), os.path.join(dst, name))


def make(venv, fakes, out):
    site = glob.glob(os.path.join(venv, "lib", "python3*", "site-packages"))
    if not site or not os.path.isdir(os.path.join(site[0], "torch")):
        raise SystemExit(f"overlay: no torch in {venv}")
    site = site[0]
    pyver = os.path.basename(os.path.dirname(site))
    os.makedirs(os.path.join(out, "bin"), exist_ok=True)
    with open(os.path.join(venv, "pyvenv.cfg")) as f:
        cfg = f.read()
    with open(os.path.join(out, "pyvenv.cfg"), "w") as f:
        f.write(cfg)
    python = os.path.join(out, "bin", "python")
    os.symlink(os.path.realpath(os.path.join(venv, "bin", "python")), python)
    os.symlink("python", os.path.join(out, "bin", "python3"))

    def libdir(src, dst):
        os.makedirs(dst)
        for name in os.listdir(src):
            target = os.path.join(fakes, name) if name in FAKED else os.path.join(src, name)
            os.symlink(target, os.path.join(dst, name))

    def nvpkg(src, dst):
        link_all(src, dst, {"lib": libdir})

    def nvidia(src, dst):
        link_all(src, dst, {name: nvpkg for name in os.listdir(src)
                            if os.path.isdir(os.path.join(src, name, "lib"))})

    def torch(src, dst):
        link_all(src, dst, {"lib": libdir})

    link_all(site, os.path.join(out, "lib", pyver, "site-packages"), {"torch": torch, "nvidia": nvidia})
    return python


if __name__ == "__main__":
    print(make(*sys.argv[1:4]))
