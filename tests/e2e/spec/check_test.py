#!/usr/bin/env python3
"""tokprof check end to end: minillm on simgpu under the shim, with and without an injected
fault, checked against the specs in pass/ (must exit 0 on the clean capture), fail/ (must exit 1 on
the capture named in CASES), bad/ (must exit 2 with SPEC:line:col and a caret, and the text of
their "// want:" lines), inconclusive/ (exit 0 on the clean capture, 3 on a TOKPROF_GPU=off one).

usage: check_test.py BUILD_DIR SRC_DIR WORKDIR"""
import glob, json, os, shutil, subprocess, sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from preload import shim_preload  # noqa: E402  (tests/preload.py)

build, src, work = sys.argv[1:4]
SIM = os.path.join(build, "tests/simgpu")
SHIM = os.path.join(build, "shim/libtokprof.so")
TKP = os.path.join(build, "decoder/tokprof")
MINILLM = os.path.join(build, "kernels/minillm")
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
failures = []


def capture(name, style="vllm", **faults):
    d = os.path.join(work, name)
    os.makedirs(d)
    env = dict(os.environ, LD_LIBRARY_PATH=SIM, LD_PRELOAD=shim_preload(SHIM), TOKPROF_OUT=d)
    env.update({k: str(v) for k, v in faults.items()})
    subprocess.run([MINILLM, "--steps", "12", "--style", style], env=env, check=True,
                   stdout=subprocess.DEVNULL)
    return glob.glob(os.path.join(d, "*.tokprof"))[0]


def violations(out):
    return [json.loads(l) for l in out.splitlines() if '"type":"violation"' in l]


def assertions(out):
    return {o["assert"]: o for o in map(json.loads, out.splitlines()) if o["type"] == "assertion"}


def check(spec, cap, *extra):
    args = [TKP, "check", *extra, spec] + ([cap] if cap else [])
    p = subprocess.run(args, capture_output=True, text=True, timeout=60)
    return p.returncode, p.stdout, p.stderr


clean = capture("clean")
# the same program without GPU time (issue 19: what reads GPU time is inconclusive there)
nogpu = capture("nogpu", TOKPROF_GPU="off")
# paged attention 8000x slower from its 40th execution: decode steps from token 5 take ~200 ms
# of simulated GPU time, which the host waits for, twice the host-clock bounds (100 ms) that the
# clean capture's steps (~2 ms, ~10-20 ms under ASan on a loaded machine) stay far below
slow = capture("slow", SIMGPU_SLOW="paged_attention:40:8000")

npass = nfail = nbad = 0
for spec in sorted(glob.glob(os.path.join(src, "pass", "*.tks"))):
    rc, out, err = check(spec, clean)
    npass += 1
    if rc != 0:
        failures.append(f"must pass: {spec} on the clean capture: exit {rc}\n{out}{err}")

# fail/NAME.tks -> which capture must violate it (and, for the fault specs, the clean one must not)
CASES = {
    "slow_attention": ("slow", "clean"), "slow_attention_gpu": ("slow", "clean"),
    "slow_p99": ("slow", "clean"), "attn_count": ("clean", None), "lm_head": ("clean", None),
    "mid_sync": ("clean", None), "idle": ("clean", None), "check_gap": ("clean", None),
    "baseline": ("slow", "clean"), "once_dur": ("clean", None), "setup_token": ("clean", None),
    "prev_gap": ("clean", None),
}
caps = {"clean": clean, "slow": slow}
for spec in sorted(glob.glob(os.path.join(src, "fail", "*.tks"))):
    name = os.path.basename(spec)[:-4]
    bad_cap, ok_cap = CASES[name]
    extra = ["--baseline", clean] if name == "baseline" else []
    rc, out, err = check(spec, caps[bad_cap], "--json", *extra)
    nfail += 1
    if rc != 1:
        failures.append(f"must fail: {spec} on {bad_cap}: exit {rc}\n{out}{err}")
        continue
    vio = [json.loads(l) for l in out.splitlines() if '"type":"violation"' in l]
    for v in vio:
        for key in ("assert", "line", "witness"):
            if key not in v:
                failures.append(f"{spec}: violation without {key}: {v}")
        if v["level"] != "run" and "host_start_ns" not in v:
            failures.append(f"{spec}: violation without host time: {v}")
    if name == "attn_count":
        v = vio[0]
        if v["observed"] != 4 or len(v["witness"]) != 4:
            failures.append(f"attn_count: want observed 4 with the 4 records, got {v}")
    if name.startswith("slow_attention"):
        # the 40th paged-attention execution (prefill included) is in token step 5
        if min(v["token"] for v in vio) < 5:
            failures.append(f"{name}: flagged a step before the fault: {vio[0]}")
    if name == "idle" and not any(w["role"] == "gap" for w in vio[0]["witness"]):
        failures.append(f"idle: no gap in the witness: {vio[0]}")
    near = [[w for w in v["witness"] if w["role"] == "near_miss"] for v in vio]
    if name == "lm_head":
        # the lm_head GEMM is the near miss: its m is 1024, the bound 4096
        for v, n in zip(vio, near):
            if not n or n[0]["failed"] != "r.m == 4096" or n[0]["observed"] != 1024 or \
                    n[0]["margin"] != -3072 or (n[0]["held"], n[0]["of"]) != (1, 2) or \
                    n[0]["record"] >= v["record"] or n[0]["step"] != v["step"]:
                failures.append(f"lm_head: want the step's m=1024 GEMM as the near miss: {v}")
    if name == "check_gap":
        # decode steps 1 and 2 come 1 and 2 steps after the prefill: that is the near miss
        for v, n in zip(vio, near):
            if len(n) != 1 or n[0]["token"] != 0 or n[0]["distance"] != v["token"] or \
                    n[0]["margin"] != v["token"] - 3 or n[0]["unit"] != "steps":
                failures.append(f"check_gap: want the prefill step, {v['token']} steps before: {v}")
    if name == "once_dur":
        # the near misses are the longest steps so far, nearest first, with their s.dur
        rc, out2, err = check(os.path.join(src, "helpers", "step_durations.tks"), clean, "--json")
        dur = {v["token"]: v["observed"] for v in violations(out2)}
        for v, n in zip(vio, near):
            longest = sorted((t for t in dur if t <= v["token"]), key=lambda t: -dur[t])[:3]
            got = [w["token"] for w in n]
            if got != longest or any(w["observed"] != dur[w["token"]] or
                                     w["margin"] != dur[w["token"]] - 1e9 for w in n):
                failures.append(f"once_dur: want near misses {longest} (s.dur {dur}), got {n}")
    if name == "prev_gap":
        # a violation of `X - prev X < bound` saw a gap of at least the bound: its observed value
        # is that gap, its margin bound - gap (a re-read that sees `prev` already moved: 0)
        for a in ("rec_gap", "step_gap"):
            va = [v for v in vio if v["assert"] == a]
            if not va or any(v["observed"] < v["bound"] or v["margin"] != v["bound"] - v["observed"]
                             for v in va):
                failures.append(f"prev_gap: {a} wants violations whose observed gap is >= the "
                                f"bound: {va[:2]}")
    if name == "setup_token":
        # the weight fill runs in the set-up segment: no token (not 0, the first step's); the
        # argmax sampling runs in token steps, which keep their token
        fill = [v for v in vio if v["assert"] == "no_fill"]
        sample = [v for v in vio if v["assert"] == "no_sample"]
        if not fill or any(v["token"] is not None or v.get("setup") is not True for v in fill):
            failures.append(f"setup_token: set-up records want token null, setup true: {fill}")
        if not sample or any(not isinstance(v["token"], int) or "setup" in v for v in sample):
            failures.append(f"setup_token: token-step records want their token: {sample}")
        rc, txt, err = check(spec, clean)
        if "(set-up, no token)" not in txt:
            failures.append(f"setup_token: the table does not say set-up:\n{txt}")
    if ok_cap:
        rc, out, err = check(spec, caps[ok_cap], *(["--baseline", clean] if extra else []))
        if rc != 0:
            failures.append(f"false positive: {spec} on {ok_cap}: exit {rc}\n{out}{err}")

for spec in sorted(glob.glob(os.path.join(src, "bad", "*.tks"))):
    rc, out, err = check(spec, clean)
    nbad += 1
    first = err.splitlines()[0] if err else ""
    if rc != 2 or f"{spec}:" not in first or "^" not in err:
        failures.append(f"bad spec {spec}: want exit 2 with SPEC:line:col and a caret, got "
                        f"{rc}: {err}")
    # "// want: TEXT" lines: the error's first line holds TEXT (position and reason)
    for line in open(spec):
        if line.startswith("// want: ") and line[9:].strip() not in first:
            failures.append(f"bad spec {spec}: want {line[9:].strip()!r} in {first!r}")

# every record of its domain is judged, whether its shape decides it or its program runs
kinds = {}
for line in subprocess.run([TKP, "dump", "--raw", clean], capture_output=True, text=True,
                           check=True).stdout.splitlines():
    t = json.loads(line)["type"]
    kinds[t] = kinds.get(t, 0) + 1
host = sum(kinds.get(t, 0) for t in ("launch", "graph_launch", "copy", "sync", "event_record",
                                     "stream_wait", "nvtx", "marker", "lib_call"))
d2h = sum(1 for line in subprocess.run([TKP, "dump", "--raw", clean], capture_output=True,
                                       text=True, check=True).stdout.splitlines()
          if '"type":"copy"' in line and '"dir":"DtoH"' in line and '"kind":"memcpy"' in line)
want = {"every_host_record": host, "every_kernel": kinds["launch"], "kern_once": host,
        "every_launch_run": kinds["launch"],
        "every_gpu_record": kinds.get("gpu_kernel", 0) + kinds.get("gpu_copy", 0),
        "every_d2h_bytes": d2h}
rc, out, err = check(os.path.join(src, "pass", "records.tks"), clean, "--json")
got = {k: v["evaluated"] for k, v in assertions(out).items()}
if got != want:
    failures.append(f"records.tks: evaluated {got}, want {want}")

# several processes in one input: name ids are per process, so are the tests on names (the
# hf capture's attention kernels count 4 per decode step, as alone)
hf = capture("hf", style="hf")
merged = os.path.join(work, "merged")
os.makedirs(merged)
for c in (clean, hf):
    shutil.copy(c, merged)
spec = os.path.join(src, "fail", "attn_count.tks")
rc, out, err = check(spec, merged, "--json")
alone = [assertions(check(spec, c, "--json")[1])["attn_count"] for c in (clean, hf)]
both = assertions(out)["attn_count"]
if {v["observed"] for v in violations(out)} != {4} or \
        both["evaluated"] != sum(a["evaluated"] for a in alone) or \
        both["violations"] != sum(a["violations"] for a in alone):
    failures.append(f"merged captures: want each process's counts as alone ({alone}), got "
                    f"{both} {[v['observed'] for v in violations(out)]}")

# issue 19's cost item: a guarded record-level assertion over a numeric field decides its guard
# on the record's shape (before: every record was decoded in full and run)
rc, out, err = check(os.path.join(src, "pass", "records.tks"), None, "--explain")
sect = out.split("every_d2h_bytes (line", 1)[-1].split("\n\n", 1)[0]
if "shape decides its guard: only the records it selects are decoded" not in sect:
    failures.append(f"records.tks --explain: every_d2h_bytes must have its guard decided by "
                    f"shape:\n{out}")

rc, out, err = check(os.path.join(src, "pass", "slo.tks"), None, "--explain")
if rc != 0 or "state:" not in out or "total:" not in out or "program:" not in out or \
        "streamed" not in out or "atom 0:" not in out:
    failures.append(f"--explain: exit {rc}\n{out}{err}")

# issue 19: inconclusive has its own exit status (3); a violation wins; --inconclusive=pass|fail
# override it. On the TOKPROF_GPU=off capture every GPU-time assertion is inconclusive (a count
# of slow kernels is not 0 because nothing was timed); with GPU time they all hold.
ninc = 0
for spec in sorted(glob.glob(os.path.join(src, "inconclusive", "*.tks"))):
    ninc += 1
    rc, out, err = check(spec, clean)
    if rc != 0:
        failures.append(f"inconclusive spec {spec} on the clean capture: exit {rc}\n{out}{err}")
    rc, out, err = check(spec, nogpu, "--json")
    res = assertions(out)
    if rc != 3 or not res or any(a["verdict"] != "inconclusive" or "TOKPROF_GPU=off" not in
                                 a.get("why", "") for a in res.values()):
        failures.append(f"{spec} on TOKPROF_GPU=off: want exit 3, every assertion inconclusive "
                        f"for want of GPU time, got {rc}:\n{out}{err}")
    if len(err.splitlines()) != 1 or "inconclusive" not in err:
        failures.append(f"{spec}: want one line on stderr saying inconclusive: {err!r}")
    rc, out, err = check(spec, nogpu)
    last = out.splitlines()[-1] if out else ""
    if f"{len(res)} assertions inconclusive ({len(res)} no GPU time in the capture " \
            "(TOKPROF_GPU=off))" not in last:
        failures.append(f"{spec}: the table's last line must count them and say why: {last!r}")
    for opt, want_rc in (("--inconclusive=pass", 0), ("--inconclusive=fail", 1),
                         ("--inconclusive=maybe", 2)):
        rc, out, err = check(spec, nogpu, opt)
        if rc != want_rc:
            failures.append(f"{spec} {opt}: want exit {want_rc}, got {rc}\n{err}")
    both = os.path.join(work, "violated_and_inconclusive.tks")
    with open(both, "w") as f:
        f.write(open(spec).read() + "assert none [step]: s.launches < 0;\n")
    rc, out, err = check(both, nogpu)
    if rc != 1:
        failures.append(f"a violation must win over inconclusive: exit {rc}\n{err}")

# The fast paths (numeric programs, guard verdicts and `prev` updates by record shape: issue 32)
# report what the general interpreter does (TOKPROF_CHECK_GENERAL=1), on every spec here, the
# decoder benchmark's user specs and the fuzz corpus's specs of those paths (fast_*.tks: the
# reader's RUN columns too), on the three captures
ndiff = 0
repo = os.path.join(src, "..", "..", "..")
specs = sorted(glob.glob(os.path.join(src, d, "*.tks")) for d in ("pass", "fail", "inconclusive"))
specs = [s for d in specs for s in d] + [os.path.join(repo, f"tests/bench/{u}.spec")
                                         for u in ("user10", "user10b", "user10c")] + sorted(
    glob.glob(os.path.join(repo, "tests/fuzz/corpus/spec/fast_*.tks")))
for spec in specs:
    if os.path.basename(spec) == "baseline.tks":
        continue
    for cap in (clean, nogpu, slow):
        fast = check(spec, cap, "--json")
        p = subprocess.run([TKP, "check", "--json", spec, cap], capture_output=True, text=True,
                           timeout=60, env=dict(os.environ, TOKPROF_CHECK_GENERAL="1"))
        ndiff += 1
        if fast != (p.returncode, p.stdout, p.stderr):
            failures.append(f"{spec} on {cap}: the fast paths and the general interpreter "
                            f"disagree:\n{fast}\n{(p.returncode, p.stdout, p.stderr)}")

for f in failures:
    print("FAIL:", f)
print(f"{npass} must-pass, {nfail} must-fail, {nbad} bad specs, {ninc} inconclusive specs, "
      f"{ndiff} fast/general comparisons; {len(failures)} failures")
sys.exit(1 if failures else 0)
