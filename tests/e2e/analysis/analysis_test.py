#!/usr/bin/env python3
"""tokprof analyze / summary / diff / export / heatmap / report on minillm captures made now on
the simulated GPU, with injected faults (tests/simgpu/README.md).

usage: analysis_test.py TEST --minillm EXE --simgpu DIR --shim LIB --tokprof BIN --tmp DIR
                        [--mkseries EXE]
TEST: change_point   SIMGPU_SLOW on silu_and_mul from token step 300 (x400) + SIMGPU_STALL every
                     50 steps: summary and analyze name step 300 (+-2) and the activation class
      cp_host_noise  synthetic captures (mkseries) with exact host noise and load episodes: no
                     change point (the load is a host-only shift), with or without GPU records;
                     with a GPU fault added, only the fault at 300 naming its class; assumed tokens
      cp_jitter      a clean minillm capture with SIMGPU_JITTER under a CPU hog: no change point
      diff           diff clean vs that fault capture: only silu_and_mul (and its class) are
                     regressions, exit 1; clean vs a second clean capture: exit 0
      attn_slope     the attention slope per 1k KV tokens == the cost model's within 5%
      export         export JSON: valid, ph/ts/pid/tid on every event, X dur >= 0, flows pair up,
                     slices on a track nest or are disjoint; every kernel and token step present
      heatmap        heatmap SVGs (class, position) parse as XML, have cells, axes and a legend
      heatmap_expert --kind expert on minillm --moe 8,2 --zipf 1.2 (GPU time, and calls with
                     TOKPROF_GPU=off): one column per expert, column totals == moe --json
                     expert_totals exactly, moe tokens per expert == minillm's routing, the
                     hottest column == moe's hottest expert == minillm's; a dense capture: exit 2
      report         report HTML rendered by headless Chromium: no console errors, the figures
                     are in the DOM, the screenshot is a non-trivial PNG (skipped without chromium)
Exit 0 pass, 1 fail, 77 skipped."""
import argparse, json, os, re, shutil, struct, subprocess, sys, xml.etree.ElementTree as ET
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from preload import shim_preload  # noqa: E402  (tests/preload.py)

A = None
LAYERS = 16
FAULT_STEP = 300


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def capture(name, margs, env_extra=None):
    d = os.path.join(A.tmp, name)
    os.makedirs(d, exist_ok=True)
    for f in os.listdir(d):
        os.unlink(os.path.join(d, f))
    # big rings: the test needs every record (the capture's step numbering is compared)
    env = dict(os.environ, LD_LIBRARY_PATH=A.simgpu, LD_PRELOAD=shim_preload(A.shim), TOKPROF_OUT=d,
               TOKPROF_RING_KB="65536", TOKPROF_BUFFER_MB="512")
    env.update(env_extra or {})
    p = subprocess.run([A.minillm, *margs], env=env, capture_output=True, text=True, timeout=200)
    if p.returncode:
        fail(f"minillm exited {p.returncode}: {p.stderr}")
    caps = [f for f in os.listdir(d) if f.endswith(".tokprof")]
    if len(caps) != 1:
        fail(f"expected one capture, found {caps}")
    return os.path.join(d, caps[0])


def tokprof(*args, rc=0):
    p = subprocess.run([A.tokprof, *args], capture_output=True, text=True, timeout=200)
    if p.returncode != rc:
        fail(f"tokprof {' '.join(args)}: exit {p.returncode} (want {rc}): {p.stderr}")
    return p


def fault_capture():
    # silu_and_mul runs once per layer per step (prefill included): FROM_N = step x layers.
    # x400 adds ~6.4 ms per step, far above host noise; the stall hits the token embedding
    # (named exactly: "embed" alone would also match rotary_embedding) every 50th step.
    return capture("fault", ["--layers", str(LAYERS), "--steps", "400"],
                   {"SIMGPU_SLOW": f"silu_and_mul:{FAULT_STEP * LAYERS}:400",
                    "SIMGPU_STALL": "50:2000000:Z16embedding"})


def clean_capture(name="clean"):
    return capture(name, ["--layers", str(LAYERS), "--steps", "400"])


def t_change_point():
    cap = fault_capture()
    s = json.loads(tokprof("summary", "--json", cap).stdout)
    if s["steps"] != 401:
        fail(f"{s['steps']} token steps, minillm ran 401 (records dropped?)")
    if s["tokens"] != 16 + 400:
        fail(f"tokens {s['tokens']}, want 416 (16 prompt + 400 decode)")
    an = json.loads(tokprof("analyze", "--json", cap).stdout)
    for doc, who in ((s["analysis"], "summary"), (an, "analyze")):
        cps = doc["change_points"]
        # GPU busy: the change, within +-2, naming the class; a host change point is reported
        # only next to it (within TKP_CP_NEAR = 5): the host series of this loaded VM alone
        # decides nothing, so whether it also shows the change is not asserted
        hits = [c for c in cps if c["series"] == "busy" and abs(c["step"] - FAULT_STEP) <= 2]
        if not hits:
            fail(f"{who}: no busy change point near {FAULT_STEP}: {cps}")
        for c in [hits[0]] + [c for c in cps if c["series"] == "host"]:
            if not c["classes"] or c["classes"][0]["class"] != "activation":
                fail(f"{who}: {c['series']} change point does not name activation: {c}")
        if any(abs(c["step"] - FAULT_STEP) > (2 if c["series"] == "busy" else 5) for c in cps):
            fail(f"{who}: spurious change points: {cps}")
    text = tokprof("summary", cap).stdout
    lines = [l for l in text.splitlines() if l.startswith("change")]
    if not any("step 30" in l or "step 29" in l for l in lines) or "activation" not in text:
        fail(f"summary text: {lines}")
    print("\n".join(tokprof("analyze", cap).stdout.splitlines()))


def mkseries(name, *args):
    out = os.path.join(A.tmp, name + ".tokprof")
    p = subprocess.run([A.mkseries, out, *args], capture_output=True, text=True, timeout=60)
    if p.returncode:
        fail(f"mkseries {args}: {p.stderr}")
    return out


def t_cp_host_noise():
    # Synthetic captures (mkseries.c): the host timing is perturbed exactly, so each outcome is
    # the same on every run. Noise: +-20% per step and a x2..x10 spike one step in 20; load: x1.6
    # for steps 100..140, x1.6 from step 250 on. The GPU work never changes (5% jitter).
    noisy = ["--steps", "600", "--host-noise", "20", "--gpu-jitter", "5",
             "--load", "100:140:1.6", "--load", "250:600:1.6"]
    for seed in ("1", "2", "3"):
        cap = mkseries("noise" + seed, *noisy, "--seed", seed)
        an = json.loads(tokprof("analyze", "--json", cap).stdout)
        if an["change_points"]:
            fail(f"seed {seed}: change points from host load alone: {an['change_points']}")
        # the load episodes are seen, and set aside as host-only shifts
        hs = [h["step"] for h in an["host_only_shifts"]]
        if not any(abs(h - 250) <= 2 for h in hs):
            fail(f"seed {seed}: host-only shifts {hs}, want one at 250")
        s = json.loads(tokprof("summary", "--json", cap).stdout)
        if s["analysis"]["change_points"] or "change    none" not in tokprof("summary", cap).stdout:
            fail(f"seed {seed}: summary reports a change point: {s['analysis']['change_points']}")
    # the same load with a GPU fault (a kernel 8x slower from step 300, a 2 ms stall every 50
    # steps): the change is named at 300 with the class that moved, and nothing else
    cap = mkseries("fault", *noisy, "--slow", "silu:300:8", "--stall", "50:2000000")
    cps = json.loads(tokprof("analyze", "--json", cap).stdout)["change_points"]
    busy = [c for c in cps if c["series"] == "busy"]
    if len(busy) != 1 or abs(busy[0]["step"] - 300) > 2 or busy[0]["classes"][0]["class"] != "activation":
        fail(f"fault: {cps}")
    if any(abs(c["step"] - 300) > 5 for c in cps):
        fail(f"fault: spurious change points {cps}")
    # no GPU records: heavy-tailed host noise (30%, spikes) alone gives no change point
    for seed in ("1", "2", "3"):
        cap = mkseries("nogpu" + seed, "--steps", "600", "--host-noise", "30", "--no-gpu",
                       "--seed", seed)
        an = json.loads(tokprof("analyze", "--json", cap).stdout)
        if an["change_points"] or an["host_only_shifts"]:
            fail(f"no GPU, seed {seed}: {an['change_points']} {an['host_only_shifts']}")
    # ... and tokens per step are assumed (no GEMM shapes): 1 per step after the first
    st = [x for x in json.loads(tokprof("steps", "--json", cap).stdout)["steps"]]
    if st[0]["tokens"] is not None or any(x["tokens"] != 1 or x["tokens_source"] != "assumed"
                                          for x in st[1:]):
        fail(f"assumed tokens: {[(x['tokens'], x['tokens_source']) for x in st[:4]]}")
    print(f"ok: host load set aside ({hs}), fault at {busy[0]['step']} names activation")


def t_cp_jitter():
    # a clean minillm capture with GPU jitter (SIMGPU_JITTER) while another process loads the
    # CPUs for part of the run: no change point. GPU busy time is the simulator's, the same on
    # every run; the host series moves with the load, and host changes need the GPU's backing.
    d = os.path.join(A.tmp, "jitter")
    os.makedirs(d, exist_ok=True)
    for f in os.listdir(d):
        os.unlink(os.path.join(d, f))
    env = dict(os.environ, LD_LIBRARY_PATH=A.simgpu, LD_PRELOAD=shim_preload(A.shim), TOKPROF_OUT=d,
               TOKPROF_RING_KB="65536", TOKPROF_BUFFER_MB="512", SIMGPU_JITTER="7:10")
    p = subprocess.Popen([A.minillm, "--layers", "16", "--steps", "800"], env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    hog = subprocess.Popen([sys.executable, "-c",
                            "import time\nt = time.time() + 0.2\nwhile time.time() < t: pass\n"
                            "time.sleep(0.2)\nt = time.time() + 0.5\nwhile time.time() < t: pass\n"])
    hog.wait(timeout=60)
    _, err = p.communicate(timeout=200)
    if p.returncode:
        fail(f"minillm exited {p.returncode}: {err}")
    cap = [os.path.join(d, f) for f in os.listdir(d) if f.endswith(".tokprof")][0]
    for cmd in ("analyze", "summary"):
        doc = json.loads(tokprof(cmd, "--json", cap).stdout)
        cps = (doc if cmd == "analyze" else doc["analysis"])["change_points"]
        if cps:
            fail(f"{cmd}: change points in a clean capture: {cps}")
    text = tokprof("analyze", cap).stdout
    print("\n".join(l for l in text.splitlines() if l.startswith(("change", "host-only"))))


def t_diff():
    a, b, b2 = clean_capture(), fault_capture(), clean_capture("clean2")
    d = json.loads(tokprof("diff", "--json", a, b, rc=1).stdout)
    reg = [(r["kind"], r["name"]) for r in d["rows"] if r["verdict"] != "no change"]
    kern = [n for k, n in reg if k == "kernel"]
    cls = [n for k, n in reg if k == "class"]
    if len(kern) != 1 or "silu_and_mul" not in kern[0] or cls != ["activation"]:
        fail(f"diff flagged {reg}, want silu_and_mul and the activation class only")
    row = [r for r in d["rows"] if r["kind"] == "kernel" and "silu_and_mul" in r["name"]][0]
    if row["verdict"] != "regression" or row["p"] > 1e-6:
        fail(f"silu row {row}")
    d2 = json.loads(tokprof("diff", "--json", a, b2).stdout)
    if d2["regressions"] or any(r["verdict"] != "no change" for r in d2["rows"]):
        fail(f"clean vs clean: {[r for r in d2['rows'] if r['verdict'] != 'no change']}")
    txt = tokprof("diff", a, b, rc=1)
    if "silu_and_mul" not in txt.stdout or "regression" not in txt.stderr:
        fail(f"diff text: {txt.stdout} {txt.stderr}")
    print(txt.stdout)


def t_attn_slope():
    # cost model: attention = 6000 + 40 x blocks, grid (ceil(ctx/256), heads, batch) per layer
    # (+ the combine kernel, constant): d(attention per step)/d(ctx) = 40 x heads x layers / 256
    # per KV token (batch 1). The context 129..1408 spans 5 chunks centred on the staircase, so
    # the least-squares line of the staircase is within 2% of its mean slope.
    layers, heads, prefill, steps = 8, 16, 128, 1280
    cap = capture("slope", ["--layers", str(layers), "--heads", str(heads), "--hidden", "512",
                            "--prefill", str(prefill), "--steps", str(steps)])
    an = json.loads(tokprof("analyze", "--json", cap).stdout)
    sl = an["slopes"]["attention_per_1k_kv_tokens"]
    want = 40 * heads * layers / 256 * 1000
    if an["slopes"]["prompt_tokens"] != prefill:
        fail(f"prompt tokens {an['slopes']['prompt_tokens']}, want {prefill}")
    if not sl or abs(sl["ns_per_1k"] - want) > 0.05 * want:
        fail(f"attention slope {sl}, cost model {want} ns per 1k KV tokens")
    print(f"ok: attention {sl['ns_per_1k']:.0f} ns per 1k KV tokens, cost model {want:.0f}")


def t_export():
    cap = capture("export", ["--layers", "2", "--steps", "40", "--sched", "async"])
    out = os.path.join(A.tmp, "export", "trace.json")
    tokprof("export", "--format", "perfetto", "-o", out, cap)
    with open(out) as f:
        doc = json.load(f)
    ev = doc["traceEvents"]
    tracks, flows = {}, {}
    for e in ev:
        for k in ("ph", "ts", "pid", "tid"):
            if k not in e:
                fail(f"event without {k}: {e}")
        if e["ph"] == "X":
            if e["dur"] < 0:
                fail(f"negative dur: {e}")
            tracks.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["dur"], e["name"]))
        elif e["ph"] in "sf":
            flows.setdefault(e["id"], []).append(e["ph"])
    bad = [i for i, v in flows.items() if sorted(v) != ["f", "s"]]
    if bad or not flows:
        fail(f"{len(bad)} unpaired flows of {len(flows)}: {bad[:3]}")
    eps = 1e-6
    for key, sl in tracks.items():
        stack = []
        for ts, dur, name in sorted(sl, key=lambda x: (x[0], -x[1])):
            while stack and ts >= stack[-1] - eps:
                stack.pop()
            if stack and ts + dur > stack[-1] + eps:
                fail(f"track {key}: slice {name} at {ts} dur {dur} overlaps its parent ending {stack[-1]}")
            stack.append(ts + dur)
    kernels = sum(1 for e in ev if e["ph"] == "X" and e.get("cat") == "kernel")
    steps = sum(1 for e in ev if e["ph"] == "X" and e.get("cat") == "step")
    k = json.loads(tokprof("kernels", "--json", cap).stdout)
    if kernels != sum(r["count"] for r in k["rows"]) or steps != 41:
        fail(f"{kernels} kernel slices, {steps} step slices")
    print(f"ok: {len(ev)} events, {len(flows)} flows, {len(tracks)} tracks, {kernels} kernels")


def svg_check(path, want_id):
    root = ET.parse(path).getroot()
    ns = "{http://www.w3.org/2000/svg}"
    if root.tag != ns + "svg" or root.get("id") != want_id:
        fail(f"{path}: root {root.tag} id {root.get('id')}")
    rects = root.findall(f".//{ns}g[@class='cells']/{ns}rect")
    legend = root.findall(f".//{ns}g[@class='legend']")
    texts = [t.text for t in root.iter(ns + "text")]
    if len(rects) < 10 or not legend or not any(t and "step" in t for t in texts):
        fail(f"{path}: {len(rects)} cells, legend {bool(legend)}, texts {texts[:8]}")
    return len(rects)


def t_heatmap():
    cap = capture("heatmap", ["--layers", "4", "--steps", "1500"])
    d = os.path.join(A.tmp, "heatmap")
    tokprof("heatmap", "-o", os.path.join(d, "c.svg"), cap)
    n = svg_check(os.path.join(d, "c.svg"), "heatmap-class")
    tokprof("heatmap", "--kind", "position", "-o", os.path.join(d, "p.svg"), cap)
    m = svg_check(os.path.join(d, "p.svg"), "heatmap-position")
    root = ET.parse(os.path.join(d, "c.svg")).getroot()
    cols = {r.get("x") for r in root.iter("{http://www.w3.org/2000/svg}rect")}
    if len(cols) > 1100:
        fail(f"{len(cols)} columns: not binned")
    print(f"ok: class heatmap {n} cells, position heatmap {m} cells")


def t_heatmap_expert():
    # minillm --moe 8,2 with Zipf routing: expert e gets ~1/(e+1)^1.2 of the tokens
    d = os.path.join(A.tmp, "heatmap_expert")
    os.makedirs(d, exist_ok=True)
    log = os.path.join(d, "minillm.jsonl")
    margs = ["--layers", "4", "--steps", "600", "--moe", "8,2", "--zipf", "1.2", "--log", log]
    ns = "{http://www.w3.org/2000/svg}"
    for gpu in ("always", "off"):
        cap = capture(f"heatmap_expert_{gpu}", margs, {"TOKPROF_GPU": gpu})
        svg = os.path.join(d, f"e_{gpu}.svg")
        tokprof("heatmap", "--kind", "expert", "-o", svg, cap)
        moe = json.loads(tokprof("moe", "--json", cap).stdout)["threads"]
        if len(moe) != 1:
            fail(f"moe: {len(moe)} threads")
        moe = moe[0]
        root = ET.parse(svg).getroot()
        if root.get("id") != "heatmap-expert":
            fail(f"{svg}: id {root.get('id')}")
        cols = [int(t.get("data-col")) for t in root.findall(f".//{ns}g[@class='columns']/{ns}text")]
        bars = root.findall(f".//{ns}g[@class='totals']/{ns}rect")
        cells = root.findall(f".//{ns}g[@class='cells']/{ns}rect")
        legend = root.findall(f".//{ns}g[@class='legend']")
        if cols != list(range(moe["experts"])) or len(bars) != moe["experts"] or moe["experts"] != 8:
            fail(f"{svg}: columns {cols}, {len(bars)} total bars, moe reports {moe['experts']} experts")
        if len(cells) < 100 or not legend:
            fail(f"{svg}: {len(cells)} cells, legend {bool(legend)}")
        # rows: 601 steps with expert calls, binned to at most 250 rows
        ys = {c.get("y") for c in cells}
        if not 200 <= len(ys) <= 250:
            fail(f"{svg}: {len(ys)} rows (601 steps binned to <= 250)")
        got = [int(b.get("data-total")) for b in bars]
        key = "gpu_ns" if gpu == "always" else "calls"
        want = [e[key] for e in moe["expert_totals"]]
        if got != want or (gpu == "off" and any(e["gpu_ns"] is not None for e in moe["expert_totals"])):
            fail(f"{svg}: column totals {got}, moe --json {key} {want}")
        # minillm's own routing: tokens per expert, all steps and layers
        steps = [json.loads(l) for l in open(log) if '"type":"step"' in l]
        truth = [sum(s["expert_load"][l][e] for s in steps for l in range(4)) for e in range(8)]
        if [e["tokens"] for e in moe["expert_totals"]] != truth:
            fail(f"moe tokens per expert {[e['tokens'] for e in moe['expert_totals']]}, minillm {truth}")
        hot = max(range(8), key=lambda e: (got[e], -e))
        if hot != moe["hottest_expert"] or hot != truth.index(max(truth)):
            fail(f"hottest column {hot}, moe {moe['hottest_expert']}, minillm {truth}")
        print(f"ok ({gpu}): {len(ys)} rows, column totals {got} ({key}); hottest expert {hot}")
    # no MoE data: one line on stderr, exit 2, no file
    cap = capture("heatmap_expert_dense", ["--layers", "2", "--steps", "8"])
    out = os.path.join(d, "dense.svg")
    p = tokprof("heatmap", "--kind", "expert", "-o", out, cap, rc=2)
    if "no MoE data" not in p.stderr or len(p.stderr.strip().splitlines()) != 1 or os.path.exists(out):
        fail(f"dense capture: {p.stderr!r}, file left: {os.path.exists(out)}")


def chromium():
    for c in ("chromium", "chromium-browser", "google-chrome"):
        if shutil.which(c):
            return shutil.which(c)
    return None


def t_report():
    exe = chromium()
    if not exe:
        print("skipped: no chromium (scripts/setup.sh installs Debian's chromium package)")
        sys.exit(77)
    cap = fault_capture()
    d = os.path.join(A.tmp, "report")
    os.makedirs(d, exist_ok=True)
    html = os.path.join(d, "report.html")
    spec = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "spec", "pass", "slo.tks")
    tokprof("report", "-o", html, "--spec", spec, cap)
    text = open(html).read()
    # C++ kernel names demangled, without their parameters, in the top-kernels table (the whole
    # demangled name on hover): "paged_attention_decode_kernel<128>", not "_Z29paged_..."
    top = text[text.index('id="top-kernels"'):]
    top = top[:top.index("</table>")]
    cells = re.findall(r'<td class="n" title="([^"]*)">([^<]*)</td>', top)
    if not cells or any(c.startswith("_Z") for _, c in cells) or \
            not any(t.startswith("void ") and "(" not in c for t, c in cells):
        fail(f"top kernels not demangled: {cells[:4]}")
    for bad in ("<script", "http://", "https://"):
        if bad in text.replace('xmlns="http://www.w3.org/2000/svg"', ""):
            fail(f"report has {bad}: not self-contained")
    png = os.path.join(d, "shot.png")
    base = [exe, "--headless", "--disable-gpu", "--no-sandbox", "--user-data-dir=" + os.path.join(d, "prof"),
            "--enable-logging=stderr", "--v=0", "--window-size=1400,2000"]
    p = subprocess.run(base + ["--screenshot=" + png, "file://" + html], capture_output=True,
                       text=True, timeout=120)
    console = [l for l in p.stderr.splitlines() if "CONSOLE" in l or "Uncaught" in l]
    if console:
        fail(f"console errors: {console[:5]}")
    with open(png, "rb") as f:
        head = f.read(24)
    size = os.path.getsize(png)
    if head[:8] != b"\x89PNG\r\n\x1a\n" or size < 20000:
        fail(f"screenshot {size} bytes, header {head[:8]}")
    w, h = struct.unpack(">II", head[16:24])
    dom = subprocess.run(base + ["--dump-dom", "file://" + html], capture_output=True, text=True,
                         timeout=120).stdout
    for fid in ("fig-latency", "fig-classes", "heatmap-class", "top-kernels", "change-points", "spec"):
        if f'id="{fid}"' not in dom:
            fail(f"#{fid} missing from the rendered DOM")
    if dom.count("<rect") < 100 or "polyline" not in dom:
        fail("figures have no shapes in the DOM")
    print(f"ok: rendered {w}x{h}, {size} bytes, figures present, no console errors")


def main():
    global A
    ap = argparse.ArgumentParser()
    ap.add_argument("test")
    for o in ("--minillm", "--simgpu", "--shim", "--tokprof", "--tmp"):
        ap.add_argument(o, required=True)
    ap.add_argument("--mkseries")
    A = ap.parse_args()
    os.makedirs(A.tmp, exist_ok=True)
    globals()["t_" + A.test]()
    return 0


if __name__ == "__main__":
    sys.exit(main())
