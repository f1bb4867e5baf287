#!/usr/bin/env python3
"""Several captures read as one timeline (decoder/capture/multireader.h). Runs on simgpu.

usage: multi_check.py CASE BUILD_DIR WORKDIR
  fork    tests/e2e/shim/shim_forker (parent + fork child, two captures): `summary DIR` reports both
          processes' launches and threads; `dump DIR` interleaves them by host time with "pid" on
          every record, and equals `dump FILE FILE`; steps, kernels, export and analyze read the
          directory; stacks and moe refuse a merge of two processes with one line, exit 2
  rotate  TOKPROF_MAX_MB=0.08: a rotated capture (three or more files) reads as one process: the
          directory's counts are the sums of the files', its threads and steps are not doubled,
          and `dump DIR` gives each file's records in rotation order
  errors  an empty directory, a directory holding a non-capture, stdin merged: exit 2, one line
"""
import glob, json, os, shutil, subprocess, sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from preload import shim_preload  # noqa: E402  (tests/preload.py)

case, build, work = sys.argv[1:4]
SIM = os.path.join(build, "tests/simgpu")
SHIM = os.path.join(build, "shim/libtokprof.so")
TKP = os.path.join(build, "decoder/tokprof")
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)


def env(**kw):
    e = dict(os.environ, LD_LIBRARY_PATH=SIM, LD_PRELOAD=shim_preload(SHIM), TOKPROF_OUT=work)
    for k in ("TOKPROF_MODE", "TOKPROF_TRIGGER", "TOKPROF_MAX_MB", "TOKPROF_KEEP"):
        e.pop(k, None)
    e.update({k: str(v) for k, v in kw.items()})
    return e


def tkp(*args):
    p = subprocess.run([TKP, *args], capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def jsonl(out):
    return [json.loads(l) for l in out.splitlines()]


def summary(*paths):
    rc, out, err = tkp("summary", "--json", *paths)
    if rc or err:
        fail(f"summary {paths}: exit {rc}: {err}")
    return json.loads(out)


if case == "fork":
    p = subprocess.run([os.path.join(build, "tests/e2e/shim/shim_forker")], env=env(),
                       capture_output=True, text=True, timeout=60)
    if p.returncode:
        fail(f"forker exit {p.returncode}: {p.stderr}")
    caps = sorted(glob.glob(os.path.join(work, "*.tokprof")))
    if len(caps) != 2:
        fail(f"want 2 captures, got {caps}")
    pids = sorted(summary(c)["pid"] for c in caps)
    s = summary(work)
    procs = sorted((q["pid"], q["threads"], q["launches"]) for q in s["processes"])
    if procs != [(pids[0], 1, 5), (pids[1], 1, 5)]:
        fail(f"processes {s['processes']}, want pids {pids} with 1 thread and 5 launches each")
    if s["launches"] != 10 or s["threads"] != 2:
        fail(f"merged: {s['launches']} launches, {s['threads']} threads; want 10 and 2")
    rc, out, err = tkp("summary", work)
    if rc or f"processes 2:" not in out:
        fail(f"text summary of the directory: exit {rc}, no 'processes 2:' line:\n{out}{err}")
    rc, out, err = tkp("dump", work)
    if rc or err:
        fail(f"dump DIR: exit {rc}: {err}")
    recs = jsonl(out)
    if any("pid" not in r for r in recs if r["type"] != "meta"):
        fail("dump DIR: a record without pid")
    if sorted({r["pid"] for r in recs if r["type"] != "meta"}) != pids:
        fail(f"dump DIR: pids {sorted({r['pid'] for r in recs})}, want {pids}")
    launches = [r for r in recs if r["type"] == "launch"]
    times = [r["host_ns"] for r in launches]
    if len(launches) != 10 or times != sorted(times):
        fail(f"dump DIR: launches not merged by time: {[(r['pid'], r['host_ns']) for r in launches]}")
    if tkp("dump", *caps)[1] != out:
        fail("dump FILE FILE differs from dump DIR")
    # per process, the records are exactly its file's, in file order
    for c in caps:
        own = jsonl(tkp("dump", c)[1])
        pid = next(r["pid"] for r in own if r["type"] == "meta")
        mine = [r for r in recs if r["pid"] == pid]
        strip = lambda rs: [{k: v for k, v in r.items() if k not in ("pid", "thread")} for r in rs]
        if strip(mine) != strip(own):
            fail(f"dump DIR: the records of pid {pid} are not its file's, in order")
    rc, out, err = tkp("steps", "--json", work)
    if rc or sorted({st["pid"] for st in json.loads(out)["steps"]}) != pids:
        fail(f"steps DIR: exit {rc}, want steps of both pids: {out[:300]} {err}")
    for args in (["kernels", work], ["analyze", work],
                 ["export", "-o", os.path.join(work, "trace.json"), work]):
        rc, out, err = tkp(*args)
        if rc:
            fail(f"{args[0]} DIR: exit {rc}: {err}")
    os.remove(os.path.join(work, "trace.json"))
    for cmd in ("stacks", "moe"):
        rc, out, err = tkp(cmd, work)
        if rc != 2 or len(err.splitlines()) != 1 or "one process at a time" not in err:
            fail(f"{cmd} DIR of two processes: exit {rc}, stderr {err!r}")
    print(f"pids {pids}: merged summary, dump by time with pid, steps, kernels, export, analyze")

elif case == "rotate":
    p = subprocess.run([os.path.join(build, "kernels/minillm"), "--steps", "10000", "--graphs"],
                       env=env(TOKPROF_MAX_MB=0.08, TOKPROF_FLUSH_MS=20, TOKPROF_GPU="off"),
                       capture_output=True, text=True, timeout=120)
    if p.returncode or p.stderr:
        fail(f"minillm exit {p.returncode}: {p.stderr}")
    caps = glob.glob(os.path.join(work, "minillm.*.tokprof"))
    if len(caps) < 3:
        fail(f"want 3 or more rotated files, got {caps}")
    order = sorted(caps, key=lambda c: int(c.split(".")[-2]) if c.count(".") == 3 else 0)
    each = [summary(c) for c in order]
    s = summary(work)
    for k in ("launches", "graph_launches", "steps", "copies", "syncs", "chunks"):
        if s[k] != sum(e[k] for e in each):
            fail(f"{k}: directory {s[k]}, files {[e[k] for e in each]}")
    if s["threads"] != 1 or len(s["processes"]) != 1 or s["processes"][0]["pid"] != each[0]["pid"]:
        fail(f"one process with one thread expected: {s['threads']} threads, {s['processes']}")
    rc, out, err = tkp("dump", work)
    want = "".join(tkp("dump", c)[1] for c in order)
    strip = lambda t: [{k: v for k, v in r.items() if k != "pid"} for r in jsonl(t)]
    if rc or err or strip(out) != strip(want):
        fail(f"dump DIR is not the files' records in rotation order (exit {rc}) {err}")
    rc, out, err = tkp("steps", "--json", work)
    tokens = [st for st in json.loads(out)["steps"] if st["kind"] == "token"]
    if rc or len(tokens) != s["steps"] or len({st["step"] for st in tokens}) != len(tokens):
        fail(f"steps DIR: exit {rc}, {len(tokens)} token steps, want {s['steps']} distinct")
    print(f"{len(caps)} rotated files: {s['launches']} launches, {s['steps']} steps, one process")

elif case == "errors":
    empty = os.path.join(work, "empty")
    os.makedirs(empty)
    bad = os.path.join(work, "bad")
    os.makedirs(bad)
    with open(os.path.join(bad, "x.1.tokprof"), "wb") as f:
        f.write(b"GIF89a, not TKP!")
    for args, want in ((["summary", empty], "no *.tokprof file"),
                       (["dump", bad], "not a tokprof capture"),
                       (["steps", empty, "-"], "no *.tokprof file"),
                       (["dump", bad, "-"], "cannot be merged")):
        rc, out, err = tkp(*args)
        if rc != 2 or out or len(err.splitlines()) != 1 or want not in err:
            fail(f"{args}: exit {rc}, stdout {out[:80]!r}, stderr {err!r}, want '{want}'")
    print("empty directory, non-capture, stdin merged: one line each, exit 2")
else:
    fail(f"unknown case {case}")
