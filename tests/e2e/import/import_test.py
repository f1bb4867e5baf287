#!/usr/bin/env python3
"""tokprof import on real and made traces, against figures from outside tokprof.

usage: import_test.py TEST --tokprof BIN --src DIR --tmp DIR
TEST: trace:NAME  one shared real trace (tests/data/traces/NAME.json.gz): kernel count, busy,
                  span, idle of all kernels == traces/README.md's figures ("ours", to the µs
                  they print); of the kernels and copies whose call is in the trace == TraceLens's
                  gpu_timeline CSV (busy_time, idle_time, total_time, within 2 µs: its floats);
                  the top kernels' totals (`kernels --json`) == README's (and, on the H100,
                  TraceLens's kernel_summary CSV per name); per step (`steps --json`), busy of
                  the kernels launched inside each step's range == the union this script
                  computes from the JSON itself
      synthetic   tests/e2e/import/synthetic.json (made by hand, every record kind): `dump` ==
                  the values written in it, converted by hand (fractions of µs, base time,
                  correlation joins, graph kernels, unlinked kernel, threads, segments)
      malformed   cut, broken and missing inputs: exit 2, one line naming the byte offset and
                  what was expected, no output file left
      views       every view on an imported capture: summary, steps, kernels, analyze, report,
                  heatmap, export, check, table; tokens are "unknown" (null / "-"), never made up
      python      the Python API (python/tokprof over --lib) on an imported capture: steps()
                  has the step's busy and a null token count, kernels() the top kernel's total
                  (run with scripts/pyenv.sh's Python: pyarrow)
Exit 0 pass, 1 fail, 77 skipped (python: no pyarrow)."""
import argparse, csv, gzip, json, os, re, subprocess, sys

A = None

# traces/README.md: "Ours" (kernels only, all of them) and the top kernels by total time
README = {
    "h100_qwen1.5-0.5b_forward": dict(kernels=1465, busy=45.433, span=49.653, idle=4.220,
                                      linked_kernels=1029, copies=242, linked_copies=169,
                                      top=[("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64", 241, 12.790),
                                           ("MulFunctor", 207, 5.582)],
                                      step="profiler-step", steps=1),
    "mi300x_vllm_decode_full_graph": dict(kernels=425, busy=10.675, span=10.700, idle=0.025,
                                          linked_kernels=425, copies=9, linked_copies=9,
                                          top=[("_matmul_ogs_NNT_bf16xbf16xmxfp4_16x128x256x1", 24, 3.762),
                                               ("_matmul_ogs_NNT_bf16xbf16xmxfp4_16x128x256x1_swiglu", 24, 3.273)],
                                          step="annotation:^execute_", steps=1, graph_launches=1),
    "mi300x_vllm_prefilldecode_piecewise": dict(kernels=413, busy=156.008, span=156.353, idle=0.345,
                                                linked_kernels=413, copies=10, linked_copies=10,
                                                top=[("_matmul_ogs_NNT_bf16xbf16xmxfp4_128x128x128x1_swiglu", 24, 83.288)],
                                                step="annotation:^execute_", steps=1, graph_launches=25),
}


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def tp(*args, ok=True):
    p = subprocess.run([A.tokprof, *args], capture_output=True, text=True, timeout=120)
    if ok and p.returncode:
        fail(f"tokprof {' '.join(args)}: exit {p.returncode}: {p.stderr.strip()}")
    return p


def union(iv):
    busy, cs, ce = 0, None, None
    for s, e in sorted(iv):
        if cs is None:
            cs, ce = s, e
        elif s > ce:
            busy += ce - cs
            cs, ce = s, e
        else:
            ce = max(ce, e)
    return busy + (ce - cs if cs is not None else 0)


def unique(pairs):
    """json object_pairs_hook: a key given twice in one object is a bug of the writer."""
    keys = [k for k, _ in pairs]
    if len(keys) != len(set(keys)):
        fail(f"duplicate keys in a JSON object: {sorted(k for k in keys if keys.count(k) > 1)}")
    return dict(pairs)


def ns(x):
    """Kineto's µs with three decimals, in ns, exactly (the text, not a float's rounding)."""
    return round(float(x) * 1000)


def test_trace(name):
    ref = dict(README[name])
    ref["timeline kernels"] = ref["kernels"]
    src = os.path.join(A.src, "tests", "data", "traces", name + ".json.gz")
    out = os.path.join(A.tmp, name + ".tokprof")
    rep = json.loads(tp("import", "--json", "--step", ref["step"], src, "-o", out).stdout, object_pairs_hook=unique)
    k, l = rep["timeline"]["kernels"], rep["timeline"]["linked"]
    # kernels only, all of them: the README's figures, printed to the µs
    for key, got in (("kernels", rep["kernels"]), ("timeline kernels", k["records"]), ("linked_kernels", rep["kernels_linked"]),
                     ("copies", rep["copies"]), ("linked_copies", rep["copies_linked"])):
        if got != ref[key]:
            fail(f"{name}: {key} {got}, README says {ref[key]}")
    for key in ("busy", "span", "idle"):
        got = round(k[key + "_ns"] / 1e6, 3)
        if abs(got - ref[key]) > 0.0005:
            fail(f"{name}: kernels {key} {got} ms, README says {ref[key]} ms")
    # linked kernels + copies: TraceLens's gpu_timeline (its floats: 2 µs)
    tl = {}
    with open(src.replace(".json.gz", ".tracelens_gpu_timeline.csv")) as f:
        for row in csv.DictReader(f):
            tl[row["type"]] = float(row["time ms"])
    for key, their in (("busy_ns", "busy_time"), ("idle_ns", "idle_time"), ("span_ns", "total_time")):
        if abs(l[key] / 1e6 - tl[their]) > 0.002:
            fail(f"{name}: linked {key} {l[key] / 1e6:.6f} ms, TraceLens {their} {tl[their]:.6f} ms")
    if rep["steps"] != ref["steps"]:
        fail(f"{name}: {rep['steps']} steps, expected {ref['steps']}")
    if rep["graph_launches"] != ref.get("graph_launches", 0):
        fail(f"{name}: {rep['graph_launches']} graph launches, README says {ref.get('graph_launches', 0)}")
    # the top kernels' totals
    kj = json.loads(tp("kernels", "--json", out).stdout)
    if kj["kernels"] != ref["kernels"]:
        fail(f"{name}: kernels --json counts {kj['kernels']}")
    rows = kj["rows"]
    for i, (sub, count, total) in enumerate(ref["top"]):
        r = rows[i]
        if sub not in r["name"] or r["count"] != count or abs(r["total_ns"] / 1e6 - total) > 0.0005:
            fail(f"{name}: kernel #{i + 1} {r['name'][:60]} x{r['count']} {r['total_ns'] / 1e6:.3f} ms, "
                 f"README: {sub} x{count} {total} ms")
    summ = src.replace(".json.gz", ".tracelens_kernel_summary.csv")
    if os.path.exists(summ):  # per name, TraceLens's sums (rows per parent op, added up)
        their = {}
        with open(summ, encoding="utf-8") as f:
            for row in csv.DictReader(f):
                n = row["Kernel name"]
                c, s = their.get(n, (0, 0.0))
                their[n] = (c + int(row["Kernel duration (µs)_count"]), s + float(row["Kernel duration (µs)_sum"]))
        ours = {r["name"]: (r["count"], r["total_ns"] / 1e3) for r in rows}
        if set(ours) != set(their):
            fail(f"{name}: kernel names differ from TraceLens's: {len(set(ours) ^ set(their))} not in both")
        for n, (c, s) in their.items():
            if ours[n][0] != c or abs(ours[n][1] - s) > 0.01:
                fail(f"{name}: {n[:60]}: ours x{ours[n][0]} {ours[n][1]:.3f} µs, TraceLens x{c} {s:.3f} µs")
    # per step: the union of the kernels whose launch lies in the step's range, from the JSON
    with gzip.open(src, "rt") as f:
        ev = json.load(f)["traceEvents"]
    pat = re.compile(r"^ProfilerStep#" if ref["step"] == "profiler-step" else ref["step"].split(":", 1)[1])
    ranges = sorted((ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])) for e in ev
                    if e.get("cat") == "user_annotation" and pat.search(e["name"]))
    calls = {e["args"]["correlation"]: ns(e["ts"]) for e in ev
             if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})}
    want = []
    for b, e in ranges:
        iv = [(ns(x["ts"]), ns(x["ts"]) + ns(x["dur"])) for x in ev if x.get("cat") == "kernel"
              and b <= calls.get(x["args"].get("correlation"), -1) < e]
        want.append((len(iv), union(iv)))
    steps = [s for s in json.loads(tp("steps", "--json", out).stdout)["steps"] if s["kind"] == "token"]
    got = [(s["gpu_kernels"], s["busy_ns"]) for s in steps]
    if got != want:
        fail(f"{name}: token steps (kernels, busy_ns) {got}, from the trace {want}")
    print(f"ok {name}: kernels {k['records']} busy {k['busy_ns'] / 1e6:.3f} span {k['span_ns'] / 1e6:.3f} "
          f"idle {k['idle_ns'] / 1e6:.3f} ms; linked {l['records']} busy {l['busy_ns'] / 1e6:.3f} "
          f"span {l['span_ns'] / 1e6:.3f} ms; steps {got}")


def test_synthetic():
    src = os.path.join(A.src, "tests", "e2e", "import", "synthetic.json")
    out = os.path.join(A.tmp, "synthetic.tokprof")
    tp("import", src, "-o", out)
    recs = [json.loads(l) for l in tp("dump", out).stdout.splitlines()]
    by = {}
    for r in recs:
        by.setdefault(r["type"], []).append(r)
    meta = by["meta"][0]
    # the base time and the first event (the early kernel at 90 µs), converted by hand
    want_meta = {"pid": 7, "start_monotonic_ns": 90000, "start_realtime_ns": 1700000000000090000,
                 "devices": [{"name": "Test GPU \u00e9\U0001F600", "uuid": ""}]}
    for k, v in want_meta.items():
        if meta[k] != v:
            fail(f"synthetic: meta {k} {meta[k]!r}, expected {v!r}")
    s = meta["source"]
    if (s["format"], s["trace_name"], s["base_time_ns"], s["kernels"], s["kernels_without_launch"],
            s["copies"], s["other_calls"]) != ("kineto", 'synthetic "trace"\n', 1700000000000000000, 4, 1, 2, 1):
        fail(f"synthetic: meta source {s}")
    la = by["launch"]
    if [(r["host_ns"], r["tid"], r["step"], r["name"], r["grid"], r["block"], r["smem"], r["stream"], r["via"])
            for r in la] != [(101250, 70, 0, "gemm_kernel", [4, 2, 1], [128, 1, 1], 1024, "0x7", "runtime")]:
        fail(f"synthetic: launches {la}")
    gk = {r["name"]: r for r in by["gpu_kernel"]}
    # 110.001 µs + 20.0005 µs: 110001 .. 130002 ns (the half ns rounds away from zero)
    want = {"gemm_kernel": (110001, 130002, 70, 0, "launch", 0),
            "graph_node_a": (210000, 220000, 70, 1, "graph_launch", 0),
            "graph_node_b": (215000, 225000, 70, 1, "graph_launch", 0),
            "early_kernel": (90000, 95000, None, None, "none", 0)}
    for n, w in want.items():
        r = gk[n]
        if (r["start_ns"], r["end_ns"], r["tid"], r["step"], r["join"], r["index"]) != w:
            fail(f"synthetic: gpu_kernel {n} {r}, expected {w}")
    cp = [(r["host_ns"], r["tid"], r["kind"], r["dir"], r["bytes"], r["async"]) for r in by["copy"]]
    if cp != [(104000, 70, "memcpy", "DtoH", 64, True), (209000, 71, "memset", "DtoD", 4, True)]:
        fail(f"synthetic: copies {cp}")
    gc = [(r["start_ns"], r["end_ns"], r["tid"], r["join"]) for r in by["gpu_copy"]]
    if gc != [(131000, 132000, 70, "copy"), (226000, 226500, 71, "copy")]:
        fail(f"synthetic: gpu copies {gc}")
    sy = by["sync"][0]
    if (sy["host_ns"], sy["kind"], sy["wait_ns"], sy["handle"]) != (105000, "stream", 28000, "0xffffffffffffffff"):
        fail(f"synthetic: sync {sy}")
    gl = by["graph_launch"][0]
    if (gl["host_ns"], gl["step"], gl["via"], gl["graph"]) != (201000, 1, "graph_rt", -1):
        fail(f"synthetic: graph launch {gl}")
    if len(by.get("event_record", [])) != 1 or "stream_wait" in by:
        fail("synthetic: one event record, no stream wait expected")
    st = [(r["tid"], r["step"], r["kind"], r["begin_ns"], r["end_ns"], r["closed_by"], r["launches"],
           r["graph_launches"], r["copies"]) for r in by["step"]]
    want_st = [(70, 0, "token", 100500, 200500, "nvtx", 1, 0, 1), (70, 1, "token", 200500, 300500, "nvtx", 0, 1, 0),
               (71, 0, "token", 200500, 300500, "nvtx", 0, 0, 1)]
    if sorted(st) != sorted(want_st):
        fail(f"synthetic: steps {st}, expected {want_st}")
    nv = [(r["host_ns"], r["step"], r["kind"], r["name"]) for r in by["nvtx"]]
    if nv != [(100500, 0, "push", "ProfilerStep#1"), (200500, 0, "pop", "ProfilerStep#1"),
              (200500, 1, "push", "ProfilerStep#2"), (300500, 1, "pop", "ProfilerStep#2")]:
        fail(f"synthetic: nvtx {nv}")
    # annotation source: one step per matching range; auto by syncs when there is no ProfilerStep
    rep = json.loads(tp("import", "--json", "--step", "annotation:#2$", src, "-o", out).stdout)
    if rep["bad_times"] != 1:  # the kernel at ts -5: before the base time, skipped and counted
        fail(f"synthetic: bad_times {rep['bad_times']}, expected 1")
    if rep["steps"] != 2 or rep["step_source"] != "annotation":  # thread 70's and 71's
        fail(f"synthetic: annotation:#2$ made {rep['steps']} steps ({rep['step_source']})")
    # auto without ProfilerStep ranges: the sync rule (a stream sync after work closes a step;
    # work never waited for is a step closed by the end)
    plain = os.path.join(A.tmp, "no_profilerstep.json")
    with open(src) as f, open(plain, "w") as g:
        g.write(f.read().replace("ProfilerStep#", "Step#"))
    rep = json.loads(tp("import", "--json", plain, "-o", out).stdout)
    st = sorted((r["tid"], r["step"], r["kind"], r["closed_by"], r["end_ns"]) for r in
                (json.loads(l) for l in tp("dump", "--type", "step", out).stdout.splitlines()))
    if rep["step_source"] != "auto: host syncs" or st != [(70, 0, "token", "stream_sync", 133000),  # the sync's return
                                                          (70, 1, "token", "exit", 300500), (71, 0, "token", "exit", 210000)]:
        fail(f"synthetic: auto by syncs: {rep['step_source']}, steps {st}")
    print("ok synthetic")


def test_malformed():
    src = os.path.join(A.src, "tests", "e2e", "import", "synthetic.json")
    text = open(src, "rb").read()
    cases = {
        "cut.json": (text[:1000], rb"byte 1000: unexpected end of input, expected"),
        "cut.json.gz": (gzip.compress(text)[:600], rb"byte \d+: "),
        "comma.json": (b'{"traceEvents":[{"ph":"X",]}', rb"byte 26: expected '\"' to begin an object member's name"),
        "number.json": (b'{"traceEvents":[{"ts":1.}]}', rb"byte 22: malformed number '1.'"),
        "trailing.json": (b'[] x', rb"byte 3: expected the end of the input"),
        "notjson.json": (b'\x89PNG', rb"byte 0: expected a value"),
        "events.json": (b'{"traceEvents":{}}', rb"byte 15: expected '\[' \(traceEvents is an array\)"),
        "escape.json": (b'["\\q"]', rb"byte 3: unknown escape"),
        "empty.json": (b'', rb"byte 0: unexpected end of input, expected a value"),
    }
    for fname, (data, pat) in cases.items():
        path, out = os.path.join(A.tmp, fname), os.path.join(A.tmp, fname + ".tokprof")
        with open(path, "wb") as f:
            f.write(data)
        p = subprocess.run([A.tokprof, "import", path, "-o", out], capture_output=True, timeout=60)
        lines = p.stderr.decode().splitlines()
        if p.returncode != 2 or len(lines) != 1 or not re.search(pat.decode(), lines[0]) or fname not in lines[0]:
            fail(f"malformed {fname}: exit {p.returncode}, stderr {p.stderr!r}, expected one line ~ {pat!r}")
        if os.path.exists(out):
            fail(f"malformed {fname}: {out} left behind")
    p = tp("import", os.path.join(A.tmp, "absent.json"), "-o", os.path.join(A.tmp, "x"), ok=False)
    if p.returncode != 2 or "No such file" not in p.stderr:
        fail(f"absent trace: exit {p.returncode}: {p.stderr!r}")
    p = tp("import", src, ok=False)
    if p.returncode != 2 or "-o" not in p.stderr:
        fail(f"no -o: exit {p.returncode}: {p.stderr!r}")
    p = tp("import", "--step", "bogus", src, "-o", os.path.join(A.tmp, "x"), ok=False)
    if p.returncode != 2 or "bogus" not in p.stderr:
        fail(f"--step bogus: exit {p.returncode}: {p.stderr!r}")
    print("ok malformed")


def test_views():
    src = os.path.join(A.src, "tests", "data", "traces", "h100_qwen1.5-0.5b_forward.json.gz")
    out = os.path.join(A.tmp, "views.tokprof")
    tp("import", src, "-o", out)
    sj = json.loads(tp("summary", "--json", out).stdout)
    txt = tp("summary", out).stdout
    if "tokens per step: not known" not in txt:
        fail(f"summary does not say tokens are unknown:\n{txt}")
    steps = json.loads(tp("steps", "--json", out).stdout)["steps"]
    tok = [s for s in steps if s["kind"] == "token"]
    if len(tok) != 1 or tok[0]["tokens"] is not None or tok[0]["tokens_source"] is not None:
        fail(f"steps: tokens of an imported step must be null: {tok}")
    if not re.search(r"^\s+0\s+0\s+25286 token\s+-\s", tp("steps", out).stdout, re.M):
        fail("steps (text): the token step's tokens must be '-'")
    csvrows = list(csv.DictReader(tp("steps", "--csv", out).stdout.splitlines()))
    if csvrows[0].get("tokens") not in ("", None):
        fail(f"steps --csv: tokens {csvrows[0].get('tokens')!r}")
    tp("kernels", "--by", "class", out)
    tp("analyze", out)
    tp("gemm", out)
    rep = os.path.join(A.tmp, "views.html")
    tp("report", out, "-o", rep)
    html = open(rep, encoding="utf-8").read()
    if "sm90_xmma_gemm" not in html:
        fail("report: the top kernel is not in the HTML")
    for kind in ("class", "position"):
        svg = os.path.join(A.tmp, f"views.{kind}.svg")
        tp("heatmap", "--kind", kind, "-o", svg, out)
        if not open(svg).read().startswith("<svg"):
            fail(f"heatmap --kind {kind}: not an SVG")
    ex = os.path.join(A.tmp, "views.trace.json")
    tp("export", "-o", ex, out)
    json.load(open(ex))
    spec = os.path.join(A.tmp, "views.tks")
    with open(spec, "w") as f:  # the step's GPU span, 34.892 ms (TraceLens's total_time)
        f.write("assert gpu_deadline [step]: s.gpu_dur <= 20ms;\n")
    p = tp("check", spec, out, ok=False)
    if p.returncode != 1 or "34.89ms vs 20ms" not in p.stdout:
        fail(f"check: exit {p.returncode}, expected a violation 34.89ms vs 20ms:\n{p.stdout}{p.stderr}")
    rows = [json.loads(l) for l in tp("table", "steps", "--format", "json", "--compress", "none",
                                       out).stdout.splitlines()]
    tok = [r for r in rows if r["kind"] == "token"]
    if len(tok) != 1 or tok[0]["tokens"] != 0 or tok[0]["busy_ns"] != 31760058:  # 0: unknown (FLEET.md)
        fail(f"table steps: {tok}")
    if sj["tokens"] is not None or sj["gpu"]["available"] is not True or sj["gpu"]["busy_p50_ns"] != 31760058:
        fail(f"summary --json: tokens {sj['tokens']!r} (must be null: unknown), gpu {sj['gpu']}")
    print("ok views")


def test_python():
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        print("SKIP: no pyarrow in this Python")
        sys.exit(77)
    os.environ["TOKPROF_DECODER_LIB"] = A.lib
    os.environ["TOKPROF_CLI"] = A.tokprof
    sys.path.insert(0, os.path.join(A.src, "python"))
    import tokprof
    src = os.path.join(A.src, "tests", "data", "traces", "h100_qwen1.5-0.5b_forward.json.gz")
    out = os.path.join(A.tmp, "python.tokprof")
    tp("import", src, "-o", out)
    cap = tokprof.open(out)
    st = cap.steps().to_pylist()
    tok = [r for r in st if r["kind"] == "token"]
    if len(tok) != 1 or tok[0]["busy_ns"] != 31760058 or tok[0]["tokens"] not in (None, 0):
        fail(f"python steps(): {tok}")
    top = max(cap.kernels().to_pylist(), key=lambda r: r["total_ns"])
    if not top["name"].startswith("sm90_xmma_gemm") or top["count"] != 241 or round(top["total_ns"] / 1e6, 3) != 12.790:
        fail(f"python kernels(): top {top}")
    if cap.summary().get("tokens") is not None:
        fail("python summary(): tokens must be null")
    print("ok python")


def main():
    global A
    ap = argparse.ArgumentParser()
    ap.add_argument("test")
    ap.add_argument("--tokprof", required=True)
    ap.add_argument("--src", required=True)
    ap.add_argument("--tmp", required=True)
    ap.add_argument("--lib")
    A = ap.parse_args()
    os.makedirs(A.tmp, exist_ok=True)
    if A.test.startswith("trace:"):
        test_trace(A.test.split(":", 1)[1])
    elif A.test == "synthetic":
        test_synthetic()
    elif A.test == "malformed":
        test_malformed()
    elif A.test == "views":
        test_views()
    elif A.test == "python":
        test_python()
    else:
        fail(f"unknown test {A.test}")


if __name__ == "__main__":
    main()
