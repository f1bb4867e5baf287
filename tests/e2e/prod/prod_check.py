#!/usr/bin/env python3
"""The shim in production: flight recorder, budgets, failures. Runs on simgpu.

usage: prod_check.py CASE BUILD_DIR WORKDIR
  flight_step    TOKPROF_MODE=flight, TOKPROF_TRIGGER=step>500ms; SIMGPU_STALL delays one step's
                 first kernel by 1.5 s (the host waits for it: its step lasts >= 1.5 s whatever the
                 machine's speed; the others are ~0.3 ms of simulated time). Exactly one snapshot;
                 it decodes, holds that step and the second before it, starts with META
  flight_signal  SIGUSR2 -> one snapshot (trigger "signal")
  flight_gpu_window  TOKPROF_GPU=window:1/1000000000 (nothing timed after step 0): a slow-step
                 trigger arms GPU time for the next TOKPROF_GPU_TRIGGER_STEPS (5) steps; the
                 snapshot has exactly that run timed
  flight_file    touching TOKPROF_TRIGGER_FILE -> one snapshot (trigger "file")
  flight_api     tokprof_trigger("slo miss") from the program -> one snapshot saying so
  rate_limit     three signals within TOKPROF_TRIGGER_MIN_S, each sent once the previous one's
                 snapshot is complete: one snapshot, two suppressed
  snapshot_keep  TOKPROF_TRIGGER_MIN_S=0, TOKPROF_KEEP=2, three signals, each sent once the
                 previous snapshot is complete: three snapshots taken, snap1 and snap2 remain
  The flight cases run minillm with TOKPROF_LOG=debug and wait for what the shim says it did (ready,
  snapshot begun, snapshot complete, trigger suppressed) before the next step: no sleeping for it,
  so a loaded machine or ASan (2-5x slower) changes how long they take, not what they see.
  rotate_keep    TOKPROF_MAX_MB=0.08, TOKPROF_KEEP=3: the newest three files remain, each starts
                 with META, decodes on its own, stays under the cap plus one chunk
  unwritable     TOKPROF_OUT under a regular file: one warning, no file, program output unchanged
  efbig          RLIMIT_FSIZE (SIGXFSZ left at its default, which kills): one warning, the program
                 exits 0 with its output unchanged, the capture decodes without a torn tail
  sigterm        SIGTERM mid-run: the capture decodes (steps, launches)
  exit           _exit after launches: the capture decodes every launch
  slow_writer    TOKPROF_TEST_WRITER_DELAY_MS=300 (each chunk write takes 0.3 s): the program
                 completes every launch, and launched = recorded + dropped, exactly
  spawn          a CUDA program posix_spawns another: each writes its own capture, the child's META
                 ppid is the parent's pid
"""
import glob, json, os, re, resource, shutil, signal, subprocess, sys, threading, time
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from preload import shim_preload  # noqa: E402  (tests/preload.py)

case, build, work = sys.argv[1:4]
SIM = os.path.join(build, "tests/simgpu")
SHIM = os.path.join(build, "shim/libtokprof.so")
TKP = os.path.join(build, "decoder/tokprof")
MINILLM = os.path.join(build, "kernels/minillm")
PROG = os.path.join(build, "tests/e2e/prod/prod_prog")
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)


def env(**kw):
    e = dict(os.environ, LD_LIBRARY_PATH=SIM, LD_PRELOAD=shim_preload(SHIM), TOKPROF_OUT=work,
             TOKPROF_GPU="off")
    for k in ("TOKPROF_MODE", "TOKPROF_TRIGGER", "TOKPROF_MAX_MB", "TOKPROF_KEEP"):
        e.pop(k, None)
    e.update({k: str(v) for k, v in kw.items()})
    return e


def dump(path, *extra):
    p = subprocess.run([TKP, "dump", *extra, path], capture_output=True, text=True)
    return p.returncode, [json.loads(l) for l in p.stdout.splitlines()], p.stderr


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def snaps():
    return sorted(glob.glob(os.path.join(work, "*.snap*.tokprof")))


def check_snapshot(path, trigger):
    rc, recs, err = dump(path)
    if rc or err:
        fail(f"{path}: exit {rc}, {err}")
    if not recs or recs[0]["type"] != "meta":
        fail(f"{path}: first record is not META")
    if sum(r["type"] == "meta" for r in recs) != 1:
        fail(f"{path}: more than one META")
    snap = recs[0].get("snapshot")
    if not snap or snap["trigger"] != trigger:
        fail(f"{path}: META snapshot {snap}, want trigger {trigger}")
    if recs[0]["config"]["mode"] != "flight":
        fail(f"{path}: config {recs[0]['config']}")
    with open(path, "rb") as f:
        if f.read(12)[10] & 2 == 0:
            fail(f"{path}: header lacks the snapshot flag")
    if not any(r["type"] == "launch" for r in recs):
        fail(f"{path}: no launches")
    return recs


class Flight:
    """minillm (a million steps) in flight mode with TOKPROF_LOG=debug, its stderr read as it
    comes: the shim's debug lines say when it is ready for triggers and what each one did."""

    WAIT_S = 90  # for one event; each takes well under a second on an idle machine

    def __init__(self, margs, **kw):
        e = env(TOKPROF_MODE="flight", TOKPROF_FLUSH_MS=50, TOKPROF_LOG="debug", **kw)
        self.p = subprocess.Popen([MINILLM, "--steps", "1000000", *margs], env=e,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.lines, self.eof, self.cv = [], False, threading.Condition()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        self.wait(r"capturing to ")  # initialised: the trigger signal's handler is installed

    def _read(self):
        for line in self.p.stderr:
            with self.cv:
                self.lines.append(line.rstrip("\n"))
                self.cv.notify_all()
        with self.cv:
            self.eof = True
            self.cv.notify_all()

    def wait(self, *patterns, start=0):
        """The first stderr line from index `start` on that matches one of `patterns`: its index
        and match."""
        deadline = time.monotonic() + self.WAIT_S
        with self.cv:
            i = start
            while True:
                for i in range(i, len(self.lines)):
                    for pat in patterns:
                        m = re.search(pat, self.lines[i])
                        if m:
                            return i, m
                i = len(self.lines)
                left = deadline - time.monotonic()
                if self.eof or left <= 0:
                    break
                self.cv.wait(left)
        self.p.kill()
        fail(f"waited for {patterns}: exit {self.p.wait()}, stderr {self.lines}")

    def trigger(self, fire):
        """fire()s a trigger and waits for the shim to act on it: "suppressed", or the snapshot's
        path once that snapshot is complete (its after-window written and the file closed)."""
        n = len(self.lines)
        fire()
        i, m = self.wait(r"snapshot (\S+) begins", r"trigger \S+ \(.*\) suppressed", start=n)
        if not m.group(0).startswith("snapshot"):
            return "suppressed"
        self.wait(r"snapshot " + re.escape(m.group(1)) + r": \d+ chunks$", start=i + 1)
        return m.group(1)

    def signal(self):
        return self.trigger(lambda: self.p.send_signal(signal.SIGUSR2))

    def stop(self):
        """SIGINT (minillm keeps its default action: the capture ends where it is); the exit
        status and stderr."""
        self.p.send_signal(signal.SIGINT)
        rc = self.p.wait(timeout=60)
        self.reader.join(timeout=60)
        return rc, self.lines


def minillm_out(s):
    return [l for l in s.splitlines() if "wall =" not in l and "host" not in l]


if case == "flight_step":
    stall_ns = 1_500_000_000
    e = env(TOKPROF_MODE="flight", TOKPROF_TRIGGER="step>500ms", TOKPROF_FLIGHT_BEFORE_S=1,
            TOKPROF_FLIGHT_AFTER_S=0.5, TOKPROF_FLUSH_MS=50, SIMGPU_STALL=f"30000:{stall_ns}")
    p = subprocess.run([MINILLM, "--steps", "10000"], env=e, capture_output=True, text=True,
                       timeout=120)
    if p.returncode or p.stderr:
        fail(f"exit {p.returncode}, stderr {p.stderr!r}")
    s = snaps()
    if len(s) != 1:
        fail(f"want one snapshot, got {s}")
    recs = check_snapshot(s[0], "step")
    steps = [r for r in recs if r["type"] == "step" and r["kind"] == "token"]
    slow = [r for r in steps if r["end_ns"] - r["begin_ns"] >= stall_ns]
    if len(slow) != 1:
        fail(f"want the stalled step once in the snapshot, got {len(slow)} of {len(steps)}")
    before = [r for r in steps if r["end_ns"] < slow[0]["begin_ns"]]
    span = (slow[0]["begin_ns"] - min(r["begin_ns"] for r in before)) / 1e9 if before else 0
    if span < 0.7:  # BEFORE_S=1, at the granularity of 50 ms chunks
        fail(f"snapshot covers {span:.2f} s before the slow step, want ~1 s")
    after = [r for r in steps if r["begin_ns"] > slow[0]["end_ns"]]
    if not after:
        fail("no step after the slow one")
    print(f"one snapshot: the {(slow[0]['end_ns'] - slow[0]['begin_ns']) / 1e9:.2f} s step, "
          f"{len(before)} steps over {span:.2f} s before it, {len(after)} after; "
          f"{recs[0]['snapshot']['why']}")

elif case in ("flight_signal", "flight_file"):
    trig = os.path.join(work, "trigger")
    f = Flight(["--graphs"], TOKPROF_FLIGHT_AFTER_S=0.3, TOKPROF_TRIGGER_FILE=trig)
    if case == "flight_signal":
        f.signal()
    else:
        f.trigger(lambda: open(trig, "w").close())
    rc, err = f.stop()
    quiet = [l for l in err if not re.search(r"^tokprof\[\d+\]: (capturing to|snapshot) ", l)]
    if rc != -signal.SIGINT or quiet:
        fail(f"exit {rc}, stderr beyond the debug lines {quiet}")
    if len(snaps()) != 1:
        fail(f"want one snapshot, got {snaps()}")
    recs = check_snapshot(snaps()[0], "signal" if case == "flight_signal" else "file")
    n = sum(r["type"] == "launch" for r in recs)
    print(f"{snaps()[0]}: {n} launches, {recs[0]['snapshot']['why']}")

elif case == "flight_gpu_window":
    # TOKPROF_GPU=window (the production default's mode) with a window that never comes again
    # after step 0: the slow-step trigger arms GPU time for the TOKPROF_GPU_TRIGGER_STEPS steps
    # after it, so the snapshot holds GPU records for one run of exactly 5 consecutive steps.
    # Steps enough to go on for seconds after the trigger, and 2 s after it in the snapshot: a
    # loaded writer acts on the slow step late, and CUPTI hands its buffers over later still.
    e = env(TOKPROF_MODE="flight", TOKPROF_TRIGGER="step>500ms", TOKPROF_FLIGHT_BEFORE_S=0.2,
            TOKPROF_FLIGHT_AFTER_S=2, TOKPROF_FLUSH_MS=50, SIMGPU_STALL="30000:1000000000",
            TOKPROF_GPU="window:1/1000000000", TOKPROF_GPU_TRIGGER_STEPS=5)
    p = subprocess.run([MINILLM, "--steps", "30000"], env=e, capture_output=True, text=True,
                       timeout=120)
    if p.returncode or p.stderr or len(snaps()) != 1:
        fail(f"exit {p.returncode}, stderr {p.stderr!r}, snapshots {snaps()} (want one)")
    recs = check_snapshot(snaps()[0], "step")
    traced = sorted({r["step"] for r in recs if r["type"] == "gpu_kernel"} - {0})
    if not traced or traced != list(range(traced[0], traced[0] + 5)):
        fail(f"GPU records for steps {traced[:12]} ({len(traced)}): want one run of 5 after "
             "the trigger")
    print(f"{snaps()[0]}: GPU time for steps {traced[0]}..{traced[-1]} after the trigger")

elif case == "flight_api":
    e = env(TOKPROF_MODE="flight", TOKPROF_FLUSH_MS=20, TOKPROF_FLIGHT_AFTER_S=0.2)
    p = subprocess.run([PROG, "trigger", "slo miss"], env=e, capture_output=True, text=True,
                       timeout=60)
    if p.returncode or p.stderr or "found" not in p.stdout:
        fail(f"exit {p.returncode}: {p.stdout} {p.stderr}")
    if len(snaps()) != 1:
        fail(f"want one snapshot, got {snaps()}")
    recs = check_snapshot(snaps()[0], "api")
    if recs[0]["snapshot"]["why"] != "slo miss":
        fail(f"why {recs[0]['snapshot']}")
    # outside flight mode the call does nothing
    shutil.rmtree(work)
    os.makedirs(work)
    p = subprocess.run([PROG, "trigger", "x"], env=env(), capture_output=True, text=True)
    if p.returncode or snaps() or len(glob.glob(os.path.join(work, "*.tokprof"))) != 1:
        fail(f"stream mode: exit {p.returncode}, files {os.listdir(work)}")
    print("tokprof_trigger: one snapshot saying 'slo miss'; nothing in stream mode")

elif case == "rate_limit":
    # Each signal after the first comes when no snapshot is in progress: only the period can
    # suppress it.
    f = Flight(["--style", "vllm", "--sched", "async", "--graphs"], TOKPROF_TRIGGER_MIN_S=3600,
               TOKPROF_FLIGHT_AFTER_S=0.2)
    got = [f.signal() for _ in range(3)]
    f.stop()
    if got[0] == "suppressed" or got[1:] != ["suppressed", "suppressed"] or len(snaps()) != 1:
        fail(f"signals did {got}; snapshots {snaps()}")
    check_snapshot(snaps()[0], "signal")
    print(f"3 signals in the period: 1 snapshot, 2 suppressed")

elif case == "snapshot_keep":
    f = Flight(["--style", "vllm", "--sched", "async", "--graphs"], TOKPROF_TRIGGER_MIN_S=0,
               TOKPROF_FLIGHT_AFTER_S=0.2, TOKPROF_KEEP=2)
    taken = [re.sub(r".*\.(snap\d+)\.tokprof$", r"\1", f.signal()) for _ in range(3)]
    f.stop()
    names = [re.sub(r".*\.(snap\d+)\.tokprof$", r"\1", s) for s in snaps()]
    if taken != ["snap0", "snap1", "snap2"] or names != ["snap1", "snap2"]:
        fail(f"snapshots taken {taken}, remaining {snaps()}")
    for s in snaps():
        check_snapshot(s, "signal")
    print("3 snapshots, the newest 2 kept")

elif case == "rotate_keep":
    cap = 0.08  # format 5: a graph step is ~25 bytes
    e = env(TOKPROF_MAX_MB=cap, TOKPROF_KEEP=3, TOKPROF_FLUSH_MS=20)
    p = subprocess.run([MINILLM, "--steps", "20000", "--graphs"], env=e, capture_output=True,
                       text=True, timeout=120)
    if p.returncode or p.stderr:
        fail(f"exit {p.returncode}: {p.stderr}")
    caps = glob.glob(os.path.join(work, "minillm.*.tokprof"))
    idx = sorted(int(c.split(".")[-2]) if c.count(".") == 3 else 0 for c in caps)
    if len(idx) != 3 or idx[0] < 3 or idx != list(range(idx[0], idx[0] + 3)):
        fail(f"want the newest 3 of more than 3 files, got indices {idx}")
    biggest = 0
    for c in caps:
        rc, recs, err = dump(c, "--raw")
        chunks = [r for r in recs if r["type"] == "chunk"]
        if rc or err or recs[1]["type"] != "meta" or not any(r["type"] == "launch" for r in recs):
            fail(f"{c}: exit {rc}, {err}, first records {[r['type'] for r in recs[:2]]}")
        sizes = [b - a for a, b in zip([r["offset"] for r in chunks],
                                       [r["offset"] for r in chunks[1:]] + [os.path.getsize(c)])]
        biggest = max(biggest, os.path.getsize(c))
        if os.path.getsize(c) > cap * 1048576 + max(sizes):
            fail(f"{c}: {os.path.getsize(c)} bytes, cap {cap} MB plus one chunk {max(sizes)}")
    print(f"files {idx} kept of {idx[-1] + 1}; each decodes alone; largest {biggest} bytes")

elif case == "unwritable":
    f = os.path.join(work, "afile")
    open(f, "w").close()
    args = [MINILLM, "--steps", "3"]
    base = subprocess.run(args, env=dict(os.environ, LD_LIBRARY_PATH=SIM), capture_output=True,
                          text=True)
    for mode in ("stream", "flight"):
        p = subprocess.run(args, env=env(TOKPROF_OUT=os.path.join(f, "sub"), TOKPROF_MODE=mode),
                           capture_output=True, text=True)
        lines = p.stderr.strip().splitlines()
        if p.returncode != base.returncode or minillm_out(p.stdout) != minillm_out(base.stdout):
            fail(f"{mode}: output or exit changed")
        if len(lines) != 1 or "capture off" not in lines[0]:
            fail(f"{mode}: want one warning, got {lines}")
    if os.listdir(work) != ["afile"]:
        fail(f"files written: {os.listdir(work)}")
    print(f"one warning: {lines[0]}")

elif case == "efbig":
    args = [MINILLM, "--steps", "3000", "--style", "hf"]
    base = subprocess.run(args, env=dict(os.environ, LD_LIBRARY_PATH=SIM), capture_output=True,
                          text=True)
    limit = 100_000

    def lim():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
        signal.signal(signal.SIGXFSZ, signal.SIG_DFL)

    p = subprocess.run(args, env=env(TOKPROF_FLUSH_MS=10), capture_output=True, text=True,
                       preexec_fn=lim)
    lines = p.stderr.strip().splitlines()
    if p.returncode != base.returncode or minillm_out(p.stdout) != minillm_out(base.stdout):
        fail(f"exit {p.returncode} (want {base.returncode}) or output changed")
    if len(lines) != 1 or "File too large" not in lines[0]:
        fail(f"want one warning, got {lines}")
    cap = glob.glob(os.path.join(work, "*.tokprof"))[0]
    rc, recs, err = dump(cap)
    if rc or err or not any(r["type"] == "launch" for r in recs):
        fail(f"capture after EFBIG: exit {rc}, {err!r}")
    print(f"{os.path.getsize(cap)} bytes under a {limit}-byte limit, decodes whole; {lines[0]}")

elif case == "sigterm":
    p = subprocess.Popen([MINILLM, "--steps", "1000000", "--graphs"], env=env(TOKPROF_FLUSH_MS=20),
                         stdout=subprocess.DEVNULL)
    deadline = time.time() + 60
    cap = None
    while time.time() < deadline:
        caps = glob.glob(os.path.join(work, "*.tokprof"))
        if caps and os.path.getsize(caps[0]) > 20000:
            cap = caps[0]
            break
        time.sleep(0.01)
    p.send_signal(signal.SIGTERM)
    p.wait()
    if not cap or p.returncode != -signal.SIGTERM:
        fail(f"no capture grew, or exit {p.returncode}")
    rc, recs, err = dump(cap)
    steps = sum(1 for r in recs if r["type"] == "step")
    if rc or steps < 2:
        fail(f"after SIGTERM: exit {rc}, {steps} steps; {err}")
    print(f"SIGTERM mid-run: capture decodes {steps} steps")

elif case == "exit":
    p = subprocess.run([PROG, "exit", "1000"], env=env(TOKPROF_FLUSH_MS=20), capture_output=True,
                       text=True, timeout=60)
    if p.returncode or p.stderr:
        fail(f"exit {p.returncode}: {p.stderr}")
    cap = glob.glob(os.path.join(work, "*.tokprof"))[0]
    rc, recs, err = dump(cap)
    n = sum(1 for r in recs if r["type"] == "launch")
    if rc or n != 1000:
        fail(f"after _exit: exit {rc}, {n} launches of 1000; {err}")
    print("_exit: the capture decodes all 1000 launches")

elif case == "slow_writer":
    prog = os.path.join(build, "tests/e2e/shim/shim_stress")
    n, m = 8, 100000
    e = env(TOKPROF_TEST_WRITER_DELAY_MS=300, TOKPROF_RING_KB=64, SIMGPU_ZERO=1)
    p = subprocess.run([prog, str(n), str(m)], env=e, capture_output=True, text=True, timeout=170)
    if p.returncode or f"= {n * m}" not in p.stdout:
        fail(f"exit {p.returncode}: {p.stdout} {p.stderr}")
    cap = glob.glob(os.path.join(work, "*.tokprof"))[0]
    counts, last_loss = {}, {}
    rc, recs, err = dump(cap)
    for r in recs:
        counts[r["type"]] = counts.get(r["type"], 0) + 1
        if r["type"] == "loss":
            last_loss[r["tid"]] = r["dropped"]
    recorded = counts.get("launch", 0) + counts.get("step", 0) + counts.get("sync", 0)
    dropped = sum(last_loss.values())
    want = n * m + n + 1  # launches, each thread's closing step record, main's sync
    if rc or recorded + dropped != want or dropped == 0:
        fail(f"recorded {recorded} + dropped {dropped} != {want} (or nothing dropped); {err}")
    print(f"slow disk: program did its {n * m} launches; recorded {recorded} + dropped {dropped}"
          f" = {want}")

elif case == "spawn":
    p = subprocess.run([PROG, "spawn", MINILLM, "--steps", "3"], env=env(), capture_output=True,
                       text=True, timeout=60)
    if p.returncode or p.stderr:
        fail(f"exit {p.returncode}: {p.stdout} {p.stderr}")
    caps = sorted(glob.glob(os.path.join(work, "*.tokprof")))
    metas = {}
    for c in caps:
        rc, recs, err = dump(c)
        if rc or err:
            fail(f"{c}: exit {rc}, {err}")
        m = recs[0]
        metas[m["program"]] = (m, sum(r["type"] == "launch" for r in recs))
    if set(metas) != {"prod_prog", "minillm"}:
        fail(f"captures {caps}")
    parent, child = metas["prod_prog"], metas["minillm"]
    if child[0]["ppid"] != parent[0]["pid"] or parent[1] != 5 or child[1] < 100:
        fail(f"child ppid {child[0]['ppid']}, parent pid {parent[0]['pid']}, launches "
             f"{parent[1]}/{child[1]}")
    print(f"parent {parent[0]['pid']} ({parent[1]} launches) spawned minillm {child[0]['pid']} "
          f"(ppid {child[0]['ppid']}, {child[1]} launches), each its own capture")
else:
    fail(f"unknown case {case}")
