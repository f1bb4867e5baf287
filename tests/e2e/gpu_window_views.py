#!/usr/bin/env python3
"""Every view that shows GPU time, on a windowed capture: a step without GPU records is unknown.

One minillm run on simgpu with TOKPROF_GPU=window:2/10 (tier 2 on for steps s with s % 10 < 2,
the shim's rule that e2e_gpu_modes checks against the capture): the other token steps launched
kernels and have no GPU record. Their GPU time is not known, so no view may show it as 0 or
average a 0 in. Which steps are timed comes from the setting (s % 10 < 2), not from tokprof.
One case per view (--only CASE; a ctest each):

  summary      text: GPU busy p50 over the timed steps, says "N timed of M token steps"
  summary_json gpu.timed_steps == the timed token steps; busy_p50_ns == the median of the timed
               steps' busy_ns (steps --json), not a median with zeros in it (0 here)
  steps        --json: GPU fields null for every untimed step, numbers for timed ones; --csv
               empty fields; text '-'
  table_steps  tokprof table steps, JSONEachRow and Native read by a current ClickHouse (chdb,
               when installed): GPU columns NULL (not 0) for untimed steps
  table_classes  tokprof table step_classes: no row of an untimed step (no 0 gpu_ns row)
  table_moe    tokprof table moe of a windowed minillm --moe 8,2 capture: expert_gpu_ns null
               exactly on the untimed steps
  table_calls  tokprof table calls: timed_flops / gpu_ns per shape equals an always capture's
               flops / gpu_ns (the TFLOP/s a fleet query computes)
  gemm         tokprof gemm --json: TFLOP/s per shape over the timed calls only (equal to an
               always capture's of the same run)
  heatmap      tokprof heatmap --kind class: each untimed step column drawn "untimed" (grey),
               no timed column drawn so
  heatmap_position  tokprof heatmap --kind position: each untimed segment's column grey
  heatmap_expert  tokprof heatmap --kind expert of a windowed MoE capture: each untimed step's
               row grey
  moe_fused    tokprof moe --json, fused MoE kernels: untimed steps' gpu_ns null, per-step
               figures over the timed steps
  moe_totals   tokprof moe --json expert_totals.gpu_calls: the timed steps' calls (fewer than
               calls on the windowed capture, all of them on an always one)
  report       tokprof report: the stacked class bars and the heatmap mark the untimed steps
  check        a GPU assertion on a step: inconclusive on each untimed token step (exit 3),
               judged on the timed ones (docs/SPEC.md "Unknown")
  top          tokprof top --once: GPU busy share over the timed steps (their busy over their
               host time), "N of M steps timed"; a share diluted by the untimed steps fails
  prom         tokprof serve --prometheus: tokprof_gpu_busy_seconds_total over the new
               tokprof_gpu_timed_step_seconds_total is the timed steps' busy share (the Grafana
               panel's ratio), not diluted by the untimed steps
  python       tokprof.open(cap).steps(): None for untimed steps' GPU columns

usage: gpu_window_views.py --cli TOKPROF --shim LIBTOKPROF --minillm MINILLM --simgpu DIR
         --work DIR [--lib LIBTOKPROF_DECODER --src SRC] [--only CASE]
"""
import argparse
import csv
import io
import json
import os
import re
import shutil
import subprocess
import sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from preload import shim_preload  # noqa: E402  (tests/preload.py)

STEPS = 200
GPU_COLS = ("gpu_kernels", "gpu_copies", "span_ns", "busy_ns", "idle_ns", "copy_ns")
CHDB_PY = os.environ.get("TOKPROF_CHDB_VENV", "/opt/tokprof-chdb-venv") + "/bin/python3"


def capture(a, margs=None, name="cap", gpu="window:2/10"):
    work = os.path.join(a.work, name)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    env = dict(os.environ, LD_LIBRARY_PATH=a.simgpu, LD_PRELOAD=shim_preload(a.shim),
               TOKPROF_OUT=work, TOKPROF_GPU=gpu)
    subprocess.run([a.minillm] + (margs or ["--steps", str(STEPS)]), env=env, check=True,
                   stdout=subprocess.DEVNULL, timeout=120)
    caps = [f for f in os.listdir(work) if f.endswith(".tokprof")]
    assert len(caps) == 1, caps
    return os.path.join(work, caps[0])


def tkp(a, *args, ok=(0,)):
    p = subprocess.run([a.cli] + list(args), capture_output=True, text=True, timeout=120)
    if p.returncode not in ok:
        raise AssertionError(f"tokprof {' '.join(args)}: exit {p.returncode}: {p.stderr}")
    return p.stdout


def steps_json(a, cap):
    return json.loads(tkp(a, "steps", "--json", cap))["steps"]


def timed(seg, launched):
    """The window's rule (TOKPROF_GPU=window:2/10): segments s % 10 < 2 that sent work."""
    return seg % 10 < 2 or not launched


def sent(s):
    return s["launches"] or s["graph_launches"] or s["copies"]


def median(v):
    """The decoder's pNN (base/sort.h): the value at rank ceil(p * n), 1-based."""
    v = sorted(v)
    return v[max(0, -(-len(v) // 2) - 1)]


def gpu_nulls(rows, what):
    """Rows (dicts) whose GPU columns are not null exactly for the untimed steps."""
    errs = []
    for s in rows:
        t = timed(s["seg"], sent(s))
        for c in GPU_COLS:
            if not t and s[c] is not None:
                errs.append(f"{what} seg {s['seg']} not timed, {c} = {s[c]} (want null)")
            if t and s[c] is None:
                errs.append(f"{what} seg {s['seg']} timed, {c} null")
    return errs


def token_split(rows):
    tok = [s for s in rows if s["kind"] == "token"]
    t = [s for s in tok if timed(s["seg"], sent(s))]
    u = [s for s in tok if not timed(s["seg"], sent(s))]
    assert t and u, "the window capture must have timed and untimed token steps"
    return tok, t, u


def case_summary(a, cap):
    rows = steps_json(a, cap)
    tok, t, _ = token_split(rows)
    out = tkp(a, "summary", cap)
    line = next(l for l in out.splitlines() if l.startswith("latency"))
    m = re.search(r"GPU busy per step p50 ([0-9.]+) ms", line)
    want = median([s["busy_ns"] for s in t if s["gpu_kernels"]]) / 1e6
    if not m or abs(float(m.group(1)) - want) > 0.0015:
        return f"summary: busy p50 not over the timed steps ({want:.3f} ms): {line!r}"
    if f"{len(t)} timed of {len(tok)} token steps" not in line:
        return f"summary: does not say '{len(t)} timed of {len(tok)} token steps': {line!r}"
    return None


def case_summary_json(a, cap):
    rows = steps_json(a, cap)
    tok, t, _ = token_split(rows)
    g = json.loads(tkp(a, "summary", "--json", cap))["gpu"]
    busy = [s["busy_ns"] for s in t if s["gpu_kernels"]]
    errs = []
    if g.get("timed_steps") != len(busy) or g.get("token_steps") != len(tok):
        errs.append(f"timed_steps/token_steps {g.get('timed_steps')}/{g.get('token_steps')}, "
                    f"want {len(busy)}/{len(tok)}")
    if g.get("busy_p50_ns") != median(busy):
        errs.append(f"busy_p50_ns {g.get('busy_p50_ns')}, want {median(busy)} (timed steps only)")
    if not g.get("busy_p99_ns") or g["busy_p99_ns"] < g["busy_p50_ns"]:
        errs.append(f"busy_p99_ns {g.get('busy_p99_ns')}")
    return "summary --json: " + "; ".join(errs) if errs else None


def case_steps(a, cap):
    errs = gpu_nulls(steps_json(a, cap), "json")
    csvrows = list(csv.DictReader(io.StringIO(tkp(a, "steps", "--csv", cap))))
    for s in csvrows:
        if not timed(int(s["seg"]), int(s["launches"]) or int(s["graph_launches"]) or
                     int(s["copies"])) and s["busy_ns"] != "":
            errs.append(f"csv seg {s['seg']} busy_ns {s['busy_ns']!r} (want empty)")
    for l in tkp(a, "steps", cap).splitlines():
        f = l.split()
        if len(f) > 10 and f[1].isdigit():
            seg, launches = int(f[1]), int(f[7])
            if not timed(seg, launches) and f[9:12] != ["-", "-", "-"]:
                errs.append(f"text seg {seg}: span/busy/idle {f[9:12]} (want -)")
    return "steps: " + "; ".join(errs[:6]) if errs else None


def case_table_steps(a, cap):
    out = tkp(a, "table", "steps", "--format", "json", "--compress", "none", cap)
    errs = gpu_nulls([json.loads(l) for l in out.splitlines()], "json")
    ddl = tkp(a, "table", "--ddl", "clickhouse")
    if not re.search(r"busy_ns Nullable\(UInt64\)", ddl):
        errs.append("DDL: busy_ns is not Nullable(UInt64)")
    if os.path.exists(CHDB_PY):  # the Native encoding, read by a current ClickHouse
        nat = os.path.join(a.work, "steps.native")
        tkp(a, "table", "steps", "--format", "native", "--compress", "none", "-o", nat, cap)
        q = (f"SELECT seg, busy_ns IS NULL, span_ns IS NULL FROM file('{nat}', Native) "
             "ORDER BY seg FORMAT TSV")
        p = subprocess.run([CHDB_PY, "-c", "import chdb,sys; print(chdb.query(sys.argv[1], 'TSV'))",
                            q], capture_output=True, text=True, timeout=120)
        if p.returncode:
            errs.append(f"chdb: {p.stderr.strip()[-300:]}")
        launched = {s["seg"]: sent(s) for s in steps_json(a, cap)}
        for l in p.stdout.split("\n"):
            if not l.strip():
                continue
            seg, bnull, snull = (int(x) for x in l.split("\t"))
            want = 0 if timed(seg, launched.get(seg, 1)) else 1
            if bnull != want or snull != want:
                errs.append(f"native seg {seg}: busy/span NULL {bnull}/{snull}, want {want}")
    return "table steps: " + "; ".join(errs[:6]) if errs else None


def case_table_classes(a, cap):
    errs = []
    sent_by_seg = {s["seg"]: sent(s) for s in steps_json(a, cap)}
    n = 0
    for line in tkp(a, "table", "step_classes", "--format", "json", "--compress", "none",
                    cap).splitlines():
        r = json.loads(line)
        n += 1
        if not timed(r["seg"], sent_by_seg.get(r["seg"], 1)):
            errs.append(f"seg {r['seg']} not timed has a row: {r['class']} kernels {r['kernels']} "
                        f"gpu_ns {r['gpu_ns']}")
        elif not r["gpu_ns"] and not r["kernels"]:
            errs.append(f"seg {r['seg']} a row of zeros ({r['class']})")
    if not n:
        errs.append("no rows at all (the timed steps have kernels)")
    return "table step_classes: " + "; ".join(errs[:6]) if errs else None


def case_table_moe(a, cap):
    """tokprof table moe of a windowed MoE capture: expert_gpu_ns NULL on untimed steps."""
    moecap = capture(a, ["--moe", "8,2", "--steps", "24"], "moecap")
    sent_by_seg = {s["seg"]: sent(s) for s in steps_json(a, moecap)}
    errs, n = [], 0
    for line in tkp(a, "table", "moe", "--format", "json", "--compress", "none",
                    moecap).splitlines():
        r = json.loads(line)
        n += 1
        t = timed(r["seg"], sent_by_seg.get(r["seg"], 1))
        if t != (r["expert_gpu_ns"] is not None):
            errs.append(f"seg {r['seg']} {'timed' if t else 'not timed'}: expert_gpu_ns "
                        f"{r['expert_gpu_ns']}")
    if not n:
        errs.append("no rows")
    return "table moe: " + "; ".join(errs[:6]) if errs else None


def case_gemm(a, cap):
    """tokprof gemm --json: TFLOP/s per shape is the same on the windowed capture as on an
    always capture of the same run (simgpu's cost model is deterministic): FLOPs of untimed
    calls over the timed calls' GPU time would inflate it about fivefold."""
    full = capture(a, None, "capalways", "always")

    def tflops(c):
        out = json.loads(tkp(a, "gemm", "--json", c))["shapes"]
        return {(x["op"], x["m"], x["n"], x["k"]): x.get("tflops") for x in out}
    w, f = tflops(cap), tflops(full)
    errs = [f"{k}: {w[k]} TFLOP/s windowed, {f.get(k)} always" for k in w
            if w[k] is not None and f.get(k) and abs(w[k] / f[k] - 1) > 0.02]
    if not any(v is not None for v in w.values()):
        errs.append("no shape has a TFLOP/s")
    return "gemm: " + "; ".join(errs[:4]) if errs else None


def case_table_calls(a, cap):
    """tokprof table calls: per shape, timed_flops / gpu_ns on the windowed capture equals
    flops / gpu_ns on an always capture of the same run (flops / gpu_ns would be ~5x)."""
    full = capture(a, None, "capalways", "always")

    def tf(c, num):
        rows = {}
        out = tkp(a, "table", "calls", "--format", "json", "--compress", "none", c)
        for l in out.splitlines():
            r = json.loads(l)
            k = (r["op"], r["m"], r["n"], r["k"])
            x = rows.setdefault(k, [0, 0])
            x[0] += r[num]
            x[1] += r["gpu_ns"]
        return {k: f / g for k, (f, g) in rows.items() if g}
    w, f = tf(cap, "timed_flops"), tf(full, "flops")
    errs = [f"{k}: {w[k]:.4f} windowed, {f.get(k)} always" for k in w
            if not f.get(k) or abs(w[k] / f[k] - 1) > 0.02]
    if not w:
        errs.append("no row with GPU time")
    return "table calls: " + "; ".join(errs[:4]) if errs else None


def untimed_cols(svg, fig_id):
    """The data-col of the rects marked untimed inside <svg id=fig_id>."""
    m = re.search(r'<svg[^>]*id="%s".*?</svg>' % re.escape(fig_id), svg, re.S)
    if not m:
        return None
    return {int(c) for c in re.findall(r'class="untimed" data-col="(\d+)"', m.group(0))}


def want_untimed_cols(a, cap):
    """Token step columns (bin 1 at this length) of the untimed steps: the thread has one."""
    tok, _, _ = token_split(steps_json(a, cap))
    return {i for i, s in enumerate(tok) if not timed(s["seg"], sent(s))}


def case_heatmap(a, cap):
    out = os.path.join(a.work, "class.svg")
    tkp(a, "heatmap", "--kind", "class", "-o", out, cap)
    got, want = untimed_cols(open(out).read(), "heatmap-class"), want_untimed_cols(a, cap)
    if got != want:
        return f"heatmap: columns drawn untimed {sorted(got or [])}, want {sorted(want)}"
    return None


def case_heatmap_position(a, cap):
    """tokprof heatmap --kind position: columns are segments (bin 1 here); an untimed one grey."""
    out = os.path.join(a.work, "position.svg")
    tkp(a, "heatmap", "--kind", "position", "-o", out, cap)
    want = {s["seg"] for s in steps_json(a, cap) if not timed(s["seg"], sent(s))}
    got = untimed_cols(open(out).read(), "heatmap-position")
    if got != want:
        return (f"heatmap position: columns drawn untimed {sorted(got or [])[:12]}, want "
                f"{sorted(want)[:12]}")
    return None


def case_heatmap_expert(a, cap):
    """tokprof heatmap --kind expert of a windowed MoE capture: rows are steps (bin 1); each
    untimed step's row grey in every expert column, no timed row so."""
    moecap = capture(a, ["--moe", "8,2", "--steps", "24"], "moecap")
    out = os.path.join(a.work, "expert.svg")
    tkp(a, "heatmap", "--kind", "expert", "-o", out, moecap)
    svg = open(out).read()
    m = re.search(r'<svg[^>]*id="heatmap-expert".*?</svg>', svg, re.S)
    ys = sorted({int(y) for y in re.findall(r'class="untimed" data-col="\d+" x="[^"]*" y="(\d+)"',
                                              m.group(0) if m else "")})
    moe_steps = [x for x in steps_json(a, moecap) if x["kind"] == "token"]
    want = sum(not timed(x["seg"], sent(x)) for x in moe_steps)
    if len(ys) != want:
        return f"heatmap expert: {len(ys)} rows drawn untimed, want {want}"
    return None


def case_moe_fused(a, cap):
    """tokprof moe --json on a windowed capture with fused MoE kernels: an untimed step's
    gpu_ns null, gpu_ns_per_step over the timed steps (its p50 one of theirs, not 0)."""
    c = capture(a, ["--moe", "8,2", "--moe-fused", "--steps", "40"], "fusedcap")
    th = json.loads(tkp(a, "moe", "--json", c))["fused"]["threads"][0]
    sent_by_seg = {x["seg"]: sent(x) for x in steps_json(a, c)}
    errs, timed_ns = [], []
    for x in th["steps"]:
        t = timed(x["step"], sent_by_seg.get(x["step"], 1))
        if t != (x["gpu_ns"] is not None):
            errs.append(f"step {x['step']} {'timed' if t else 'not timed'}: gpu_ns {x['gpu_ns']}")
        elif t:
            timed_ns.append(x["gpu_ns"])
    per = th["gpu_ns_per_step"] or {}
    if not timed_ns or per.get("p50") not in timed_ns or \
            abs(per.get("mean", 0) - sum(timed_ns) / len(timed_ns)) > 1:
        errs.append(f"gpu_ns_per_step {per}, want over {len(timed_ns)} timed steps")
    return "moe (fused): " + "; ".join(errs[:4]) if errs else None


def case_moe_totals(a, cap):
    """tokprof moe --json expert_totals: gpu_calls, the calls gpu_ns is the time of, are those
    of the timed steps on a windowed capture (fewer than calls) and all calls on an always one."""
    errs = []
    for name, gpu in (("moecap", "window:2/10"), ("moecap_always", "always")):
        c = capture(a, ["--moe", "8,2", "--steps", "24"], name, gpu)
        for e in json.loads(tkp(a, "moe", "--json", c))["threads"][0]["expert_totals"]:
            ok = (e["gpu_calls"] == e["calls"]) if gpu == "always" else \
                (0 < e["gpu_calls"] < e["calls"] or not e["calls"])
            if not ok:
                errs.append(f"{gpu} expert {e['expert']}: gpu_calls {e['gpu_calls']} of "
                            f"{e['calls']} calls")
    return "moe totals: " + "; ".join(errs[:4]) if errs else None


def case_report(a, cap):
    out = os.path.join(a.work, "report.html")
    tkp(a, "report", "-o", out, cap)
    html, want = open(out).read(), want_untimed_cols(a, cap)
    errs = []
    for fig in ("fig-classes", "heatmap-class"):
        got = untimed_cols(html, fig)
        if got != want:
            errs.append(f"{fig}: untimed columns {sorted(got or [])}, want {sorted(want)}")
    if not re.search(r"\d+ of \d+ token steps timed", html):
        errs.append("the summary does not say how many token steps were timed")
    return "report: " + "; ".join(errs) if errs else None


SPEC = """// a GPU assertion per step: judged where the step was timed, inconclusive where not
class k = r.kind == kernel;
assert none_slow [step]: count(k in s where r.dur > 1s) == 0;
assert busy      [step]: s.busy < 1s;
"""


def case_check(a, cap):
    spec = os.path.join(a.work, "gpu.tks")
    with open(spec, "w") as f:
        f.write(SPEC)
    p = subprocess.run([a.cli, "check", "--json", spec, cap], capture_output=True, text=True,
                       timeout=120)
    _, t, u = token_split(steps_json(a, cap))  # [step] judges every token step
    if p.returncode != 3:
        return f"check: exit {p.returncode}, want 3 (inconclusive): {p.stdout[-300:]} {p.stderr}"
    res = [json.loads(l) for l in p.stdout.splitlines() if l.strip()]
    res = [x for x in res if x.get("type") == "assertion"]
    errs = [] if len(res) == 2 else [f"{len(res)} assertions in the output, want 2"]
    for x in res:
        if x["inconclusive"] != len(u) or x["evaluated"] - x["inconclusive"] != len(t):
            errs.append(f"{x['assert']}: evaluated {x['evaluated']}, inconclusive "
                        f"{x['inconclusive']}; want {len(t)} judged and {len(u)} inconclusive")
    return "check: " + "; ".join(errs) if errs else None


def case_top(a, cap):
    rows = steps_json(a, cap)
    tok, t, _ = token_split(rows)
    tb = [s for s in t if s["gpu_kernels"]]
    want = 100.0 * sum(s["busy_ns"] for s in tb) / sum(s["host_ns"] for s in tb)
    out = tkp(a, "top", "--once", "--window", "60", cap)
    m = re.search(r"GPU busy (\d+)%.*\((\d+) of (\d+) steps timed\)", out)
    if not m:
        return f"top: no 'GPU busy N% ... (N of M steps timed)' line:\n{out}"
    busy, nt, n = int(m.group(1)), int(m.group(2)), int(m.group(3))
    if abs(busy - want) > 2 or nt != len(tb) or n != len(tok):
        return (f"top: GPU busy {busy}% over {nt} of {n} steps; want {want:.0f}% over "
                f"{len(tb)} of {len(tok)} (timed steps only)")
    return None


def case_prom(a, cap):
    """tokprof serve --prometheus: busy / timed-step seconds is the busy share of the timed
    token steps (their busy over their host time), not of all steps."""
    import socket
    import time
    import urllib.request
    with socket.socket() as so:
        so.bind(("127.0.0.1", 0))
        port = so.getsockname()[1]
    srv = subprocess.Popen([a.cli, "serve", "--prometheus", f"127.0.0.1:{port}",
                            os.path.dirname(cap)], stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, text=True)
    tok, t, _ = token_split(steps_json(a, cap))
    want = sum(x["busy_ns"] for x in t) / sum(x["host_ns"] for x in t if x["busy_ns"] is not None)
    got, text = None, ""
    try:
        for _ in range(60):
            time.sleep(0.5)
            try:
                text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read()
            except OSError:
                continue
            v = {}
            for l in text.decode().splitlines():
                m = re.match(r"(tokprof_gpu_busy_seconds_total|tokprof_gpu_timed_step_seconds_total"
                             r"|tokprof_token_steps_total)\{[^}]*\} (\S+)$", l)
                if m:
                    v[m.group(1)] = float(m.group(2))
            if v.get("tokprof_token_steps_total") == len(tok) and v.get(
                    "tokprof_gpu_timed_step_seconds_total"):
                got = v["tokprof_gpu_busy_seconds_total"] / v["tokprof_gpu_timed_step_seconds_total"]
                break
    finally:
        srv.terminate()
        srv.wait(timeout=30)
    if got is None or abs(got - want) > 0.02 * want + 0.005:
        return f"prom: busy share {got}, want {want:.4f} (timed steps only)"
    return None


def case_python(a, cap):
    if not a.lib:
        return "python: --lib and --src needed"
    os.environ["TOKPROF_DECODER_LIB"] = a.lib
    sys.path.insert(0, os.path.join(a.src, "python"))
    import tokprof  # noqa: E402
    errs = gpu_nulls(tokprof.open(cap).steps().to_pylist(), "arrow")
    return "python steps(): " + "; ".join(errs[:6]) if errs else None


CASES = {"summary": case_summary, "summary_json": case_summary_json, "steps": case_steps,
         "table_steps": case_table_steps, "table_classes": case_table_classes,
         "table_moe": case_table_moe, "table_calls": case_table_calls, "gemm": case_gemm,
         "heatmap": case_heatmap, "heatmap_position": case_heatmap_position,
         "heatmap_expert": case_heatmap_expert, "moe_fused": case_moe_fused,
         "moe_totals": case_moe_totals,
         "report": case_report, "check": case_check, "top": case_top,
         "prom": case_prom,
         "python": case_python}


def main():
    ap = argparse.ArgumentParser()
    for o in ("cli", "shim", "minillm", "simgpu", "work"):
        ap.add_argument("--" + o, required=True)
    ap.add_argument("--lib")
    ap.add_argument("--src")
    ap.add_argument("--only", default=",".join(CASES))
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    cap = capture(a)
    errors = []
    for name in a.only.split(","):
        try:
            e = CASES[name](a, cap)
        except Exception as ex:  # a view that crashed or printed nothing usable
            e = f"{name}: {type(ex).__name__}: {ex}"
        if e:
            errors.append(e)
        else:
            print(f"{name}: ok")
    if errors:
        print("FAIL:\n" + "\n".join(errors))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
