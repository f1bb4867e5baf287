#!/usr/bin/env python3
"""Sampled launch stacks (TOKPROF_STACKS) on minillm under simgpu, symbolised offline.

usage: stacks_check.py CASE BUILD_DIR WORKDIR
  first      first:4: every kernel has exactly min(launches, 4) stacks; each resolves to the
             minillm function that launched it (nearest minillm frame below nvcc's stub and the
             runtime); GEMMs (launched by the fake cuBLAS through the driver, with a `call`) show
             the cuBLAS library frames and resolve to minillm's cuBLAS call site; GPU time joins;
             --by class, --folded and --svg agree with --json
  sample     sample:7: exactly the first launch and then one in 7 carry a stack; sites as above
  backtrace  TOKPROF_STACKS_UNWINDER=backtrace (the degraded unwinder): the same sites
  off        the default: no STACK or MODULE record, no `stack` on launches, META says off
  chunks     many small chunks: every chunk defines the stacks its launches use and the modules
             of those stacks' pcs before using them (chunks stay self-contained)
  threads    --threads 3 with sample:5: per-thread countdowns, ids shared across threads
"""
import glob, json, os, re, shutil, subprocess, sys
import xml.etree.ElementTree as ET
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from preload import shim_preload  # noqa: E402  (tests/preload.py)

case, build, work = sys.argv[1:4]
SIM = os.path.join(build, "tests/simgpu")
SHIM = os.path.join(build, "shim/libtokprof.so")
TKP = os.path.join(build, "decoder/tokprof")
MINILLM = os.path.join(build, "kernels/minillm")
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def capture(*args, steps=6, **kw):
    e = dict(os.environ, LD_LIBRARY_PATH=SIM, LD_PRELOAD=shim_preload(SHIM), TOKPROF_OUT=work)
    e.update({k: str(v) for k, v in kw.items()})
    subprocess.run([MINILLM, "--steps", str(steps), *args], env=e, stdout=subprocess.DEVNULL, check=True)
    caps = glob.glob(os.path.join(work, "*.tokprof"))
    if len(caps) != 1:
        fail(f"{len(caps)} captures")
    return caps[0]


def tkp(*args):
    p = subprocess.run([TKP, *args], capture_output=True, text=True)
    if p.returncode:
        fail(f"tokprof {' '.join(args)}: exit {p.returncode}: {p.stderr}")
    return p.stdout


def dump(cap, *extra):
    return [json.loads(l) for l in tkp("dump", *extra, cap).splitlines()]


# The minillm function that launches each kernel (kernels/minillm.cu), by kernel base name; a
# second name is the caller it may be inlined into at -O2. GEMMs: the caller of cublasGemmEx
# (gemm) or of cublasLtMatmul (lm_head, inlined into run_step).
SITES = [
    (r"^fill_random_kernel", {"init_tensor"}),
    (r"^embedding_kernel", {"forward"}),
    (r"^(fused_add_)?rms_norm_kernel", {"norm", "forward"}),
    (r"^rotary_embedding_kernel", {"launch_rope", "forward"}),
    (r"^reshape_and_cache_kernel", {"forward"}),
    (r"^paged_attention_(decode|combine)_kernel", {"forward"}),
    (r"^silu_and_mul_kernel", {"act", "forward"}),
    (r"^argmax_sampling_kernel", {"run_step", "consume_sampled"}),
    (r"^nvjet_tst|^splitKreduce", {"gemm"}),
    (r"^nvjet_tss", {"lm_head", "run_step"}),
]
GEMM = re.compile(r"^nvjet|^splitKreduce")


def site_of(frames, kernel):
    """The nearest minillm frame below the CUDA stack, skipping nvcc stubs and launch<>."""
    for f in frames:
        if f["module"] != "minillm" or not f["short"]:
            continue
        s = f["short"]
        if s.startswith("__device_stub__") or s == kernel or s.startswith("launch<"):
            continue
        return re.sub(r"<.*", "", s)
    return None


def check_sites(doc, want_sampled=None):
    if doc["sampled"] == 0:
        fail("no sampled launches")
    seen = set()
    for g in doc["groups"]:
        name = g["display"]
        if want_sampled and g["sampled"] != want_sampled(g):
            fail(f"{name}: {g['sampled']} sampled of {g['launches']}, want {want_sampled(g)}")
        exp = next((s for rx, s in SITES if re.search(rx, name)), None)
        if exp is None:
            fail(f"kernel {name} has no expectation in this test")
        for p in g["paths"]:
            fr = p["frames"]
            if any(f["module"] and f["module"].startswith("libtokprof") for f in fr[:1]):
                fail(f"{name}: the shim's own frames were not skipped")
            s = site_of(fr, name)
            if s not in exp:
                fail(f"{name}: launched from {s}, want one of {sorted(exp)}; {p['folded']}")
            mods = [f["module"] for f in fr]
            if GEMM.search(name):
                # through the library: cuBLAS frames lie between the launch and the program
                i = next((k for k, m in enumerate(mods) if m == "minillm"), None)
                if not any(m and m.startswith("libcublas") for m in mods[:i]):
                    fail(f"{name}: no cuBLAS frame below minillm's: {p['folded']}")
            if not any(f["short"] in ("main", "thread_main") for f in fr):
                fail(f"{name}: the stack does not reach main: {p['folded']}")
        seen.add(name)
    return seen


def launches_with_stack(cap):
    recs = dump(cap, "--type", "launch")
    return recs, [r for r in recs if "stack" in r]


if case == "first":
    cap = capture(TOKPROF_STACKS="first:4")
    doc = json.loads(tkp("stacks", "--json", "--top", "50", cap))
    seen = check_sites(doc, lambda g: min(g["launches"], 4))
    for want in ("gemm", "norm", "init_tensor", "forward"):
        if not any(want in s for s in (site_of(p["frames"], g["display"]) or ""
                                       for g in doc["groups"] for p in g["paths"])):
            fail(f"no kernel resolved to {want}")
    recs, st = launches_with_stack(cap)
    if len(st) != doc["sampled"]:
        fail(f"dump: {len(st)} launches with a stack, stacks says {doc['sampled']}")
    if not all(r.get("call", 0) > 0 for r in st if GEMM.search(r["name"]) or "nvjet" in r["name"]):
        fail("a sampled GEMM launch lost its library `call`")
    if not doc["gpu"] or not all(p["gpu_ns"] > 0 for g in doc["groups"] for p in g["paths"]):
        fail("GPU time did not join the sampled launches")
    meta = dump(cap, "--type", "meta")[0]
    if not meta["config"]["stacks"].startswith("first:4 "):
        fail(f"META config.stacks = {meta['config'].get('stacks')}")
    # the other views
    folded = tkp("stacks", "--folded", cap).splitlines()
    total = sum(int(l.rsplit(" ", 1)[1]) for l in folded)
    if total != doc["sampled"] or not any(";gemm;" in l for l in folded):
        fail(f"folded: {total} samples, want {doc['sampled']}, and a gemm frame")
    svg = os.path.join(work, "f.svg")
    tkp("stacks", "--svg", svg, cap)
    root = ET.parse(svg).getroot()
    titles = [t.text for t in root.iter("{http://www.w3.org/2000/svg}title")]
    if not any(t.startswith("gemm ") for t in titles):
        fail("the flame graph has no gemm box")
    bycls = json.loads(tkp("stacks", "--json", "--by", "class", cap))
    names = {g["name"]: g for g in bycls["groups"]}
    if "gemm" not in names or names["gemm"]["sampled"] != sum(
            g["sampled"] for g in doc["groups"] if GEMM.search(g["display"])):
        fail(f"--by class: {sorted(names)}")
    text = tkp("stacks", cap)
    if "gemm < forward" not in text:
        fail("text view: no 'gemm < forward' path")
    print(f"ok: {len(seen)} kernels, {doc['sampled']} stacks of {doc['launches']} launches")

elif case == "sample":
    cap = capture(TOKPROF_STACKS="sample:7")
    doc = json.loads(tkp("stacks", "--json", "--top", "50", cap))
    check_sites(doc)
    recs, st = launches_with_stack(cap)
    idx = [i for i, r in enumerate(recs) if "stack" in r]
    if idx != list(range(0, len(recs), 7)):
        fail(f"sampled launches at {idx[:10]}..., want every 7th from the first")
    print(f"ok: {len(st)} of {len(recs)} launches sampled")

elif case == "backtrace":
    cap = capture(TOKPROF_STACKS="first:2", TOKPROF_STACKS_UNWINDER="backtrace")
    doc = json.loads(tkp("stacks", "--json", "--top", "50", cap))
    check_sites(doc, lambda g: min(g["launches"], 2))
    meta = dump(cap, "--type", "meta")[0]
    if meta["config"]["stacks"] != "first:2 backtrace":
        fail(f"META config.stacks = {meta['config'].get('stacks')}")
    print(f"ok: {doc['sampled']} stacks with glibc backtrace()")

elif case == "off":
    cap = capture()
    recs = dump(cap)
    if any(r["type"] in ("stack", "module") or "stack" in r for r in recs):
        fail("stack data in a capture without TOKPROF_STACKS")
    meta = [r for r in recs if r["type"] == "meta"][0]
    if meta["config"]["stacks"] != "off":
        fail(f"META config.stacks = {meta['config'].get('stacks')}")
    out = tkp("stacks", cap)
    if "no stacks" not in out:
        fail(f"tokprof stacks without stacks: {out!r}")
    print("ok")

elif case == "chunks":
    # Chunks come from the writer's 1 ms flush period, so their number depends on how long the
    # program runs and how often the writer thread gets a core: 1000 steps make ~200 here, and
    # a run that still made fewer than 5 (a starved writer) is repeated 4x longer.
    for steps in (1000, 4000, 16000):
        for f in glob.glob(os.path.join(work, "*.tokprof")):
            os.unlink(f)
        cap = capture("--style", "hf", steps=steps, TOKPROF_STACKS="sample:3", TOKPROF_FLUSH_MS=1)
        recs = dump(cap, "--raw")
        if sum(r["type"] == "chunk" for r in recs) >= 5:
            break
    chunks, stacks, mods, used = 0, {}, [], 0
    for r in recs:
        if r["type"] == "chunk":
            chunks, stacks, mods = chunks + 1, {}, []
        elif r["type"] == "module":
            mods.append((int(r["base"], 16), r["size"]))
        elif r["type"] == "stack":
            for pc in (int(x, 16) for x in r["pcs"]):
                if not any(b <= pc < b + s for b, s in mods):
                    fail(f"chunk {chunks}: stack {r['id']} pc {pc:#x} before its MODULE")
            stacks[r["id"]] = r
        elif r["type"] == "launch" and "stack" in r:
            used += 1
            if r["stack"] not in stacks:
                fail(f"chunk {chunks}: launch uses stack {r['stack']} the chunk did not define")
    if chunks < 5 or used < 20:
        fail(f"only {chunks} chunks / {used} stacked launches: the test needs more")
    print(f"ok: {chunks} chunks, {used} launches with stacks")

elif case == "threads":
    cap = capture("--threads", "3", TOKPROF_STACKS="sample:5")
    doc = json.loads(tkp("stacks", "--json", "--top", "50", cap))
    check_sites(doc)
    recs = dump(cap, "--type", "launch")
    by_tid = {}
    for r in recs:
        by_tid.setdefault(r["tid"], []).append(r)
    if len(by_tid) != 4:  # the main thread (weights) and the three workers
        fail(f"{len(by_tid)} threads launched, want 4")
    for tid, rs in by_tid.items():
        idx = [i for i, r in enumerate(rs) if "stack" in r]
        if idx != list(range(0, len(rs), 5)):
            fail(f"thread {tid}: sampled at {idx[:8]}..., want every 5th")
    print(f"ok: {doc['sampled']} stacks from 3 threads, {doc['stacks']} distinct")
else:
    fail(f"unknown case {case}")
