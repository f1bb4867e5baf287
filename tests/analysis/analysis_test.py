#!/usr/bin/env python3
"""tokprof analyze / summary / diff / export / heatmap / report on minillm captures made now on
the simulated GPU, with injected faults (tests/simgpu/README.md).

usage: analysis_test.py TEST --minillm EXE --simgpu DIR --shim LIB --tokprof BIN --tmp DIR
TEST: change_point   SIMGPU_SLOW on silu_and_mul from token step 300 (x400) + SIMGPU_STALL every
                     50 steps: summary and analyze name step 300 (+-2) and the activation class
      diff           diff clean vs that fault capture: only silu_and_mul (and its class) are
                     regressions, exit 1; clean vs a second clean capture: exit 0
      attn_slope     the attention slope per 1k KV tokens == the cost model's within 5%
      export         export JSON: valid, ph/ts/pid/tid on every event, X dur >= 0, flows pair up,
                     slices on a track nest or are disjoint; every kernel and token step present
      heatmap        heatmap SVGs (class, position) parse as XML, have cells, axes and a legend
      report         report HTML rendered by headless Chromium: no console errors, the figures
                     are in the DOM, the screenshot is a non-trivial PNG (skipped without chromium)
Exit 0 pass, 1 fail, 77 skipped."""
import argparse, json, os, shutil, struct, subprocess, sys, xml.etree.ElementTree as ET
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
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
        for series in ("host", "busy"):
            hits = [c for c in cps if c["series"] == series and abs(c["step"] - FAULT_STEP) <= 2]
            if not hits:
                fail(f"{who}: no {series} change point near {FAULT_STEP}: {cps}")
            if not hits[0]["classes"] or hits[0]["classes"][0]["class"] != "activation":
                fail(f"{who}: {series} change point does not name activation: {hits[0]}")
        if any(abs(c["step"] - FAULT_STEP) > 2 for c in cps if c["series"] == "busy"):
            fail(f"{who}: spurious GPU busy change points: {cps}")
    text = tokprof("summary", cap).stdout
    lines = [l for l in text.splitlines() if l.startswith("change")]
    if not any("step 30" in l or "step 29" in l for l in lines) or "activation" not in text:
        fail(f"summary text: {lines}")
    print("\n".join(tokprof("analyze", cap).stdout.splitlines()))


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
    A = ap.parse_args()
    os.makedirs(A.tmp, exist_ok=True)
    globals()["t_" + A.test]()
    return 0


if __name__ == "__main__":
    sys.exit(main())
