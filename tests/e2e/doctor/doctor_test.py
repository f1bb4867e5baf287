#!/usr/bin/env python3
"""`tokprof doctor` and `tokprof run --check`: one test per verdict, each on a host state made for
it (simgpu's libraries, a directory with the mode under test, a setting's value) and judged by
the exit status and the line that names the problem. The rules themselves are the shim's
(include/tokprof/outdir.h, include/tokprof/settings.def): `out_refused` also runs the shim on
the same directory and checks it refuses it with the same reason.

usage: doctor_test.py TEST --tokprof BIN --shim SO --simgpu DIR --minillm BIN --tmp DIR
       doctor_test.py settings_table --src DIR"""
import argparse
import json
import os
import re
import shutil
import stat
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from preload import shim_preload  # noqa: E402  (tests/preload.py)

A = None
# what would change a verdict if the test's own environment had it
SCRUB = ("CUDA_INJECTION64_PATH", "NVTX_INJECTION64_PATH", "LD_PRELOAD", "TOKPROF_SHIM")


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def base_env(**kw):
    env = {k: v for k, v in os.environ.items()
           if k not in SCRUB and not k.startswith(("TOKPROF_", "NSYS_", "KINETO_"))}
    env["LD_LIBRARY_PATH"] = A.simgpu
    # the test machine's free space is not ours to choose: the floor is set low but for the
    # disk test, which sets it above any disk
    env.update(TOKPROF_MIN_FREE_MB="1", TOKPROF_MIN_FREE_PCT="0")
    env.update(kw)
    return env


def doctor(env, *args, cmd=("doctor",)):
    p = subprocess.run([A.tokprof, *cmd, "--shim", A.shim, *args], env=env, capture_output=True,
                       text=True, timeout=60)
    print(f"$ tokprof {' '.join(cmd)} {' '.join(args)}: exit {p.returncode}")
    print(p.stdout + p.stderr)
    return p


def problems(p):
    return [l for l in p.stdout.splitlines() if l.startswith("problem: ")]


def expect_ok(p):
    if p.returncode != 0 or problems(p):
        fail(f"expected exit 0 and no problem, got {p.returncode}: {problems(p)} {p.stderr!r}")


def expect_problem(p, check, pattern, n=1):
    """Exit 1, exactly n problem lines, one of them on `check` matching `pattern`."""
    got = problems(p)
    if p.returncode != 1:
        fail(f"expected exit 1, got {p.returncode}")
    if len(got) != n:
        fail(f"expected {n} problem line(s), got {got}")
    if not any(l.startswith(f"problem: {check}: ") and re.search(pattern, l) for l in got):
        fail(f"no problem line on {check} matching {pattern!r}: {got}")


def outdir(name, mode):
    d = os.path.join(A.tmp, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    os.chmod(d, mode)
    return d


def t_good():
    d = outdir("good", 0o700)
    p = doctor(base_env(TOKPROF_OUT=d))
    expect_ok(p)
    for want in (r"ok +driver .*simgpu, the simulated GPU", r"ok +cupti .*tier 2 \(GPU time\) on",
                 r"ok +shim .*needs glibc", r"ok +out .*mode 0700", r"ok +runtime .*13\.0"):
        if not re.search(want, p.stdout):
            fail(f"no line matching {want!r}")
    j = doctor(base_env(TOKPROF_OUT=d), "--json")
    r = json.loads(j.stdout)
    if j.returncode != 0 or r["ok"] is not True or r["problems"] != 0:
        fail(f"--json: exit {j.returncode}, {r['ok']}, {r['problems']}")
    src = {s["name"]: s["source"] for s in r["settings"]}
    if src["TOKPROF_OUT"] != "env" or src["TOKPROF_STEP"] != "default":
        fail(f"sources: TOKPROF_OUT {src['TOKPROF_OUT']}, TOKPROF_STEP {src['TOKPROF_STEP']}")


def shim_refuses(d):
    """The shim's own word on directory d: minillm on simgpu under it, its warning line."""
    env = base_env(TOKPROF_OUT=d, LD_PRELOAD=shim_preload(A.shim))
    p = subprocess.run([A.minillm, "--steps", "2"], env=env, capture_output=True, text=True,
                       timeout=60)
    line = next((l for l in p.stderr.splitlines() if "refused" in l), None)
    if p.returncode != 0 or not line or os.listdir(d):
        fail(f"the shim did not refuse {d}: exit {p.returncode}, {p.stderr!r}, {os.listdir(d)}")
    return line


def t_out_world_writable():
    d = outdir("world", 0o777)
    expect_problem(doctor(base_env(TOKPROF_OUT=d)), "out", "writable by others without the sticky bit")
    line = shim_refuses(d)
    if "writable by others without the sticky bit" not in line:
        fail(f"the shim refuses {d} for another reason: {line}")
    # the sticky bit (as /tmp has) makes it acceptable, for both
    os.chmod(d, 0o1777)
    expect_ok(doctor(base_env(TOKPROF_OUT=d)))


def t_out_symlink():
    d = outdir("target", 0o700)
    link = os.path.join(A.tmp, "link")
    if os.path.lexists(link):
        os.remove(link)
    os.symlink(d, link)
    expect_problem(doctor(base_env(TOKPROF_OUT=link)), "out", "symbolic link")
    # tokprof run hands the shim the real path of -o: the same link is fine there
    expect_ok(doctor(base_env(), "-o", link, cmd=("run", "--check")))


def t_no_cupti():
    d = outdir("nocupti", 0o700)
    expect_problem(doctor(base_env(TOKPROF_OUT=d, TOKPROF_CUPTI_PATH="/nonexistent")), "cupti",
                   r"/nonexistent cannot be loaded.*tier 2 \(GPU time\) off")
    # asking for no GPU time is no problem
    expect_ok(doctor(base_env(TOKPROF_OUT=d, TOKPROF_CUPTI_PATH="/nonexistent", TOKPROF_GPU="off")))


def t_no_libcuda():
    d = outdir("nocuda", 0o700)
    env = base_env(TOKPROF_OUT=d)
    env.pop("LD_LIBRARY_PATH")
    probe = subprocess.run(["/sbin/ldconfig", "-p"], capture_output=True, text=True)
    if "libcuda.so.1 " in probe.stdout:
        print("SKIP: this host has a CUDA driver (libcuda.so.1 in the loader's cache)")
        sys.exit(77)
    expect_problem(doctor(env), "driver", "libcuda.so.1 not found")


def t_bad_setting():
    d = outdir("bad", 0o700)
    bad = {"TOKPROF_STEP": ("bogus", "not one of"), "TOKPROF_BUFFER_MB": ("0", r"\[1, 65536\]"),
           "TOKPROF_GPU": ("window:5/2", "must not exceed"),
           "TOKPROF_MIN_FREE_PCT": ("x", r"not a number"),
           "TOKPROF_STACKS": ("first:0", "not one of")}
    for name, (v, why) in bad.items():
        expect_problem(doctor(base_env(TOKPROF_OUT=d, **{name: v})), "settings",
                       f"{name}={re.escape(v)} is .*{why}")
    p = doctor(base_env(TOKPROF_OUT=d, TOKPROF_STEP="nvtx:(", NVTX_INJECTION64_PATH=A.shim))
    expect_problem(p, "settings", r"TOKPROF_STEP=nvtx:\( is .*not a regular expression")
    # good values of the same settings, placeholders included; a typo'd name is a warning
    p = doctor(base_env(TOKPROF_OUT=d, TOKPROF_STEP="kernel:^gemm", TOKPROF_BUFFER_MB="65536",
                        TOKPROF_GPU="window:2/5", TOKPROF_TRIGGER="step>3*p50",
                        TOKPROF_TRIGGER_SIGNAL="sigrtmin+3", TOKPROF_LOG="DEBUG", TOKPROF_STEPS="x"))
    expect_ok(p)
    if not re.search(r"warn +settings +TOKPROF_STEPS is not a variable the shim reads", p.stdout):
        fail("no warning for TOKPROF_STEPS")
    # TOKPROF_DISABLE turns the capture off
    expect_problem(doctor(base_env(TOKPROF_OUT=d, TOKPROF_DISABLE="1")), "settings",
                   "TOKPROF_DISABLE=1: the shim records nothing")


def t_disk_floor():
    d = outdir("floor", 0o700)
    expect_problem(doctor(base_env(TOKPROF_OUT=d, TOKPROF_MIN_FREE_MB="1073741824")), "disk",
                   r"under the floor of \d+ MB.*the shim writes nothing")
    # the floor is the higher of MB and PCT: 100% of the disk is above its free space
    expect_problem(doctor(base_env(TOKPROF_OUT=d, TOKPROF_MIN_FREE_PCT="100")), "disk",
                   "under the floor")


def t_run_check():
    d = outdir("run", 0o700)
    # a setuid copy of a program: AT_SECURE, the shim records nothing
    prog = os.path.join(A.tmp, "suid_minillm")
    shutil.copy(A.minillm, prog)
    os.chmod(prog, 0o4755)
    expect_problem(doctor(base_env(), "-o", d, "--", prog, cmd=("run", "--check")), "secure",
                   "is setuid")
    os.chmod(prog, 0o755)
    p = doctor(base_env(), "-o", d, "--step", "nvtx:^decode$", "--", prog, "--steps", "2",
               cmd=("run", "--check"))
    expect_ok(p)
    if not re.search(r"TOKPROF_STEP +nvtx:\^decode\$ +tokprof run --step", p.stdout):
        fail("--step not shown as the source of TOKPROF_STEP")
    if os.listdir(d):
        fail(f"run --check wrote into {d}: {os.listdir(d)}")
    # without the shim's NVTX injection, nvtx steps find nothing (doctor, not run, which sets it)
    expect_problem(doctor(base_env(TOKPROF_OUT=d, TOKPROF_STEP="nvtx:^decode$")), "nvtx",
                   "will find no step")
    # another CUPTI user (nsys sets CUDA_INJECTION64_PATH)
    expect_problem(doctor(base_env(TOKPROF_OUT=d, CUDA_INJECTION64_PATH="/opt/nsys/libinj.so")),
                   "cupti-users", "takes CUPTI")
    p = doctor(base_env(), "extra", cmd=("doctor",))
    if p.returncode != 2:
        fail(f"usage error: exit {p.returncode}")


def t_settings_table():
    """settings.def (what doctor judges by and the shim builds its table from) against the
    variables the shim names and README's table (names, defaults)."""
    src = A.src
    with open(os.path.join(src, "include/tokprof/settings.def")) as f:
        table = {m[0]: m[1] for m in re.findall(r'^TKP_SETTING\((TOKPROF_\w+), *\'.\', *"([^"]*)"',
                                                  f.read(), re.M)}
    read = set()
    for root, _, files in os.walk(os.path.join(src, "shim")):
        for n in files:
            if n.endswith(".c"):
                with open(os.path.join(root, n)) as f:
                    read |= set(re.findall(r'"(TOKPROF_[A-Z0-9_]+)"', f.read()))
    with open(os.path.join(src, "README.md")) as f:
        readme = {}
        for m in re.finditer(r"^\| `(TOKPROF_\w+)`(?: / `(_\w+)`)? \| (.*?) \|", f.read(), re.M):
            defaults = re.findall(r"`([^`]*)`", m[3]) or [""]
            # "`TOKPROF_FLIGHT_BEFORE_S` / `_AFTER_S`": the second shares the first's stem
            k = m[2].count("_") if m[2] else 0
            names = [m[1]] + (["_".join(m[1].split("_")[:-k]) + m[2]] if m[2] else [])
            for i, n in enumerate(names):
                readme[n] = defaults[min(i, len(defaults) - 1)]
    errors = [f"the shim reads {n}, settings.def lacks it" for n in sorted(read - set(table))]
    errors += [f"README documents {n}, settings.def lacks it" for n in sorted(set(readme) - set(table))]
    errors += [f"settings.def has {n}, README's table lacks it" for n in sorted(set(table) - set(readme))]
    errors += [f"{n}: README says default {readme[n]!r}, settings.def {table[n]!r}"
               for n in sorted(set(table) & set(readme)) if readme[n] != table[n] and
               not (table[n] == "" and readme[n] == "")]
    # the shim's own table is built from settings.def (shim/core/config.c includes it), so its
    # defaults and numeric bounds are these by construction; unit_shim_config tests the parses
    with open(os.path.join(src, "shim/core/config.c")) as f:
        if '#include "tokprof/settings.def"' not in f.read():
            errors.append("shim/core/config.c no longer builds its table from settings.def: "
                          "compare the shim's defaults and bounds here again")
    print(f"{len(table)} settings, the shim names {len(read)}, README documents {len(readme)}")
    if errors:
        fail("\n".join(errors))


def main():
    global A
    ap = argparse.ArgumentParser()
    ap.add_argument("test")
    for o in ("--tokprof", "--shim", "--simgpu", "--minillm", "--tmp", "--src"):
        ap.add_argument(o)
    A = ap.parse_args()
    if A.tmp:
        os.makedirs(A.tmp, exist_ok=True)
    globals()["t_" + A.test]()
    print("ok:", A.test)


if __name__ == "__main__":
    main()
