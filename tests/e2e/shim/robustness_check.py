#!/usr/bin/env python3
"""Captures that survive what production does to processes. Runs on simgpu.

usage: robustness_check.py CASE BUILD_DIR WORKDIR
  torn   a capture cut at chunk boundaries and at 300 other offsets decodes exactly the launches
         of the whole chunks before the cut (tokprof exits 0 with one warning line)
  kill   a program killed with SIGKILL mid-run leaves a capture that decodes (steps and launches)
  fork   a fork child writes its own complete capture, with its own pid and its parent's
  config bad TOKPROF_* values: one warning line each, the program's output and exit unchanged
  guest  processes that never call CUDA write nothing; an unwritable TOKPROF_OUT gives one warning
         and no capture, the program unaffected; driver entry points handed out by the runtime and
         by cuGetProcAddress are hooked; errno survives a launch
"""
import glob, json, os, random, shutil, signal, subprocess, sys, time
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from preload import foreign_host, shim_preload  # noqa: E402  (tests/preload.py)

case, build, work = sys.argv[1:4]
SIM = os.path.join(build, "tests/simgpu")
SHIM = os.path.join(build, "shim/libtokprof.so")
TKP = os.path.join(build, "decoder/tokprof")
MINILLM = os.path.join(build, "kernels/minillm")
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)


def env(**kw):
    e = dict(os.environ, LD_LIBRARY_PATH=SIM, LD_PRELOAD=shim_preload(SHIM), TOKPROF_OUT=work)
    e.update({k: str(v) for k, v in kw.items()})
    return e


def dump(path, *extra):
    p = subprocess.run([TKP, "dump", *extra, path], capture_output=True, text=True)
    return p.returncode, [json.loads(l) for l in p.stdout.splitlines()], p.stderr


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


if case == "torn":
    # GPU time off: this is about chunk integrity, and the model's own notes (late GPU records)
    # would add stderr lines of their own
    subprocess.run([MINILLM, "--steps", "100", "--style", "hf"],
                   env=env(TOKPROF_FLUSH_MS=2, TOKPROF_GPU="off"),
                   stdout=subprocess.DEVNULL, check=True)
    cap = glob.glob(os.path.join(work, "*.tokprof"))[0]
    data = open(cap, "rb").read()
    rc, recs, _ = dump(cap, "--raw")
    if rc:
        fail(f"whole capture: exit {rc}")
    # launches per chunk, and where each chunk ends
    chunks, cur = [], None
    for r in recs:
        if r["type"] == "chunk":
            cur = {"offset": r["offset"], "launches": 0}
            chunks.append(cur)
        elif r["type"] == "launch":
            cur["launches"] += 1
    ends = [c["offset"] for c in chunks[1:]] + [len(data)]
    if len(chunks) < 5:
        fail(f"only {len(chunks)} chunks: the test needs several")
    cuts = set()
    for e in ends:
        cuts.update(x for x in (e - 2, e - 1, e, e + 1, e + 2) if 0 < x <= len(data))
    rnd = random.Random(7)
    cuts.update(rnd.randrange(1, len(data)) for _ in range(150))
    cut_path = os.path.join(work, "cut.tokprof")
    for cut in sorted(cuts):
        with open(cut_path, "wb") as f:
            f.write(data[:cut])
        p = subprocess.run([TKP, "summary", "--json", cut_path], capture_output=True, text=True)
        rc, err = p.returncode, p.stderr
        want = sum(c["launches"] for c, e in zip(chunks, ends) if e <= cut)
        n = json.loads(p.stdout)["launches"] if rc == 0 else -1
        if cut < 16:
            if rc != 2:
                fail(f"cut at {cut} (inside the header): exit {rc}, want 2")
            continue
        if rc != 0 or n != want:
            fail(f"cut at {cut}: exit {rc}, {n} launches decoded, want {want}; {err}")
        torn = [l for l in err.splitlines() if "torn tail" in l or "bad chunk" in l]
        if cut not in ends and cut != 16 and len(torn) != 1:
            fail(f"cut at {cut}: want one torn-tail warning line, got {err!r}")
    print(f"{len(cuts)} cut points over {len(chunks)} chunks: each decodes its whole chunks")

elif case == "kill":
    p = subprocess.Popen([MINILLM, "--steps", "1000000"], env=env(TOKPROF_FLUSH_MS=20),
                         stdout=subprocess.DEVNULL)
    deadline = time.time() + 60
    cap = None
    while time.time() < deadline:  # wait for a few chunks, not for a time
        caps = glob.glob(os.path.join(work, "*.tokprof"))
        if caps and os.path.getsize(caps[0]) > 20000:
            cap = caps[0]
            break
        time.sleep(0.01)
    p.send_signal(signal.SIGKILL)
    p.wait()
    if not cap:
        fail("no capture grew in 60 s")
    rc, recs, err = dump(cap)
    steps = sum(1 for r in recs if r["type"] == "step" and r["kind"] == "token")
    launches = sum(1 for r in recs if r["type"] == "launch")
    s = subprocess.run([TKP, "summary", "--json", cap], capture_output=True, text=True)
    if rc != 0 or s.returncode != 0 or steps < 2 or launches < 100:
        fail(f"after SIGKILL: dump exit {rc}, summary exit {s.returncode}, {steps} steps, "
             f"{launches} launches; {err}")
    print(f"killed mid-run: capture decodes {steps} steps, {launches} launches")

elif case == "fork":
    prog = os.path.join(build, "tests/e2e/shim/shim_forker")
    p = subprocess.run([prog], env=env(), capture_output=True, text=True, timeout=60)
    if p.returncode != 0:
        fail(f"forker exit {p.returncode}: {p.stdout} {p.stderr}")
    caps = sorted(glob.glob(os.path.join(work, "*.tokprof")) + glob.glob(os.path.join(work, ".*.tokprof")))
    if len(caps) != 2:
        fail(f"want 2 captures, got {caps}")
    # the child renamed itself (argv[0] overwritten, as setproctitle does): the capture keeps the
    # program's name from when the shim was loaded
    if any(not os.path.basename(c).startswith("shim_forker.") for c in caps):
        fail(f"captures not named after the program: {[os.path.basename(c) for c in caps]}")
    by_pid = {}
    for c in caps:
        rc, recs, err = dump(c)
        meta = next(r for r in recs if r["type"] == "meta")
        names = [r["name"] for r in recs if r["type"] == "launch"]
        by_pid[meta["pid"]] = (meta, names, err)
    parent = next(m for m in by_pid.values() if "child_kernel" not in m[1])
    child = next(m for m in by_pid.values() if "child_kernel" in m[1])
    if parent[1] != ["parent_kernel"] * 5:
        fail(f"parent launches {parent[1]}")
    if child[1] != ["child_kernel"] * 5:
        fail(f"child launches {child[1]}")
    if child[0]["ppid"] != parent[0]["pid"]:
        fail(f"child's ppid {child[0]['ppid']} != parent pid {parent[0]['pid']}")
    if parent[2] or child[2]:
        fail(f"warnings decoding: {parent[2]} {child[2]}")
    if child[0].get("program") != "shim_forker":
        fail(f"child's program {child[0].get('program')!r}, want 'shim_forker'")
    print(f"parent {parent[0]['pid']}: 5 launches; child {child[0]['pid']}: 5 launches, own file")

elif case == "config":
    args = [MINILLM, "--steps", "3"]
    base = subprocess.run(args, env=dict(os.environ, LD_LIBRARY_PATH=SIM), capture_output=True,
                          text=True)
    bad = env(TOKPROF_STEP="bogus", TOKPROF_FLUSH_MS="soon", TOKPROF_BUFFER_MB="-3",
              TOKPROF_LOG="loud")
    p = subprocess.run(args, env=bad, capture_output=True, text=True)
    lines = p.stderr.strip().splitlines()
    strip = lambda s: [l for l in s.splitlines() if "wall =" not in l and "host" not in l]
    if p.returncode != base.returncode or strip(p.stdout) != strip(base.stdout):
        fail(f"output or exit changed: {p.returncode} vs {base.returncode}")
    if len(lines) != 4 or not all(l.startswith("tokprof[") for l in lines):
        fail(f"want 4 warning lines, got {lines}")
    for var in ("TOKPROF_STEP", "TOKPROF_FLUSH_MS", "TOKPROF_BUFFER_MB", "TOKPROF_LOG"):
        if not any(var in l for l in lines):
            fail(f"no warning names {var}: {lines}")
    caps = glob.glob(os.path.join(work, "*.tokprof"))
    rc, recs, _ = dump(caps[0])
    meta = next(r for r in recs if r["type"] == "meta")
    if meta["config"]["step"] != "auto" or meta["config"]["flush_ms"] != 200:
        fail(f"defaults not used: {meta['config']}")
    print("bad values: one warning each, defaults used, program unchanged:\n  " + "\n  ".join(lines))
elif case == "guest":
    for cmd in (["/bin/true"], ["sh", "-c", "echo hi >/dev/null"], [sys.executable, "-c", "pass"]):
        e = foreign_host(env()) if cmd[0] == sys.executable else env()
        p = subprocess.run(cmd, env=e, capture_output=True, text=True)
        if p.returncode or p.stderr or os.listdir(work):
            fail(f"{cmd}: exit {p.returncode}, stderr {p.stderr!r}, files {os.listdir(work)}")
    args = [MINILLM, "--steps", "2"]
    p = subprocess.run(args, env=env(TOKPROF_OUT="/nonexistent/dir"), capture_output=True, text=True)
    lines = p.stderr.strip().splitlines()
    if p.returncode or len(lines) != 1 or "/nonexistent/dir" not in lines[0]:
        fail(f"unwritable dir: exit {p.returncode}, stderr {lines}")
    prog = os.path.join(build, "tests/e2e/shim/shim_entrypoint")
    p = subprocess.run([prog], env=env(), capture_output=True, text=True)
    if p.returncode:
        fail(f"entrypoint exit {p.returncode}: {p.stdout} {p.stderr}")
    caps = glob.glob(os.path.join(work, "shim_entrypoint.*.tokprof"))
    rc, recs, _ = dump(caps[0])
    vias = [r["via"] for r in recs if r["type"] == "launch" and r["name"] == "entry_kernel"]
    if vias != ["driver"] * 5 + ["runtime", "runtime_ptsz"]:
        fail(f"entry point launches: {vias}")
    print(f"no-CUDA children write nothing; unwritable dir: {lines[0]}; {p.stdout.strip()}; "
          f"5 driver launches and 2 cooperative runtime launches captured, once each")
else:
    fail(f"unknown case {case}")
