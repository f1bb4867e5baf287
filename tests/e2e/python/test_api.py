#!/usr/bin/env python3
"""The Python API (python/tokprof) against the CLI on the same captures.

Captures are made here: minillm on the simulated GPU under the shim (one with GPU records and
CUDA graphs, two processes into one directory, MoE with per-expert GEMMs and fused), a torn
copy, and a Python loop with step markers. Then: .steps() row for row equal to `tokprof steps
--json` and to `tokprof table steps` (the fleet's encoding; docs/FLEET.md's column lists too),
.step_classes() and .moe() to `table step_classes|moe`, .kernels() to `kernels --json` and
`--csv` and `table kernels`,
.calls() to the sums of `table calls`, .summary() to `summary --json`, .records() counts to
the summary's, a merged directory, a torn capture (its whole chunks and a warning), every fuzz-corpus file (an
exception or a table, never a crash), bad input (TokprofError naming the file), check() on a
passing and a violated spec, and `with tokprof.step()` steps equal to the loop's iterations.

usage: test_api.py --cli TOKPROF --lib LIBTOKPROF_DECODER --shim LIBTOKPROF --minillm MINILLM
                   --simgpu DIR --mkcapture MKCAPTURE --src SOURCE_DIR --work DIR [--only NAME,...]
Prints "N passed, M failed"; exit 1 on any failure.
"""
import argparse
import csv
import io
import json
import os
import shutil
import subprocess
import sys
import traceback
import warnings

ap = argparse.ArgumentParser()
for a in ("cli", "lib", "shim", "minillm", "simgpu", "src", "work", "mkcapture"):
    ap.add_argument("--" + a, required=a in ("cli", "lib", "src", "work"))
ap.add_argument("--only")
A = ap.parse_args()
os.environ["TOKPROF_DECODER_LIB"] = A.lib
sys.path.insert(0, os.path.join(A.src, "python"))
import tokprof  # noqa: E402

shutil.rmtree(A.work, ignore_errors=True)
os.makedirs(A.work)
passed, failed = 0, []


def test(fn):
    global passed
    if A.only and not any(o in fn.__name__ for o in A.only.split(",")):
        return fn
    try:
        fn()
        passed += 1
        print(f"ok   {fn.__name__}")
    except Exception:
        failed.append(fn.__name__)
        print(f"FAIL {fn.__name__}\n{traceback.format_exc()}")
    return fn


def cli(*args, ok=(0,)):
    p = subprocess.run([A.cli, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert p.returncode in ok, f"{args}: exit {p.returncode}: {p.stderr}"
    return p.stdout


def cli_json(*args):
    return json.loads(cli(*args))


def capture(name, *margs, env=None, prog=None):
    d = os.path.join(A.work, name)
    os.makedirs(d, exist_ok=True)
    e = dict(os.environ, LD_LIBRARY_PATH=A.simgpu)
    e.update(env or {})
    cmd = [A.cli, "run", "--shim", A.shim, "-o", d, "--", *(prog or [A.minillm]), *margs]
    subprocess.run(cmd, env=e, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return d


def only_file(d):
    fs = sorted(f for f in os.listdir(d) if f.endswith(".tokprof"))
    assert len(fs) == 1, fs
    return os.path.join(d, fs[0])


def same_rows(table, rows):
    got = table.to_pylist()
    assert len(got) == len(rows), (len(got), len(rows))
    for i, (g, w) in enumerate(zip(got, rows)):
        assert g == w, f"row {i}:\n  api {g}\n  cli {w}"


have_runs = A.minillm and A.simgpu and A.shim and A.mkcapture and not A.only
if have_runs:
    gpu_dir = capture("gpu", "--steps", "12", "--sched", "async", "--graphs", "--batch", "4")
    gpu = only_file(gpu_dir)
    clean = only_file(capture("clean", "--steps", "12"))  # as tests/e2e/spec/check_test.py's
    merged = capture("merged", "--steps", "6")
    capture("merged", "--steps", "5", "--style", "hf")
    moe = only_file(capture("moe", "--steps", "6", "--moe", "8,2", "--zipf", "1.1", "--batch", "4"))
    moe_fused = only_file(capture("moe_fused", "--steps", "4", "--moe-fused", "--graphs"))


if have_runs:
    @test
    def steps_equal_cli():
        t = tokprof.open(gpu).steps()
        want = cli_json("steps", "--json", gpu)
        assert want["gpu"]["available"], want["gpu"]
        assert "busy_ns" in t.column_names
        same_rows(t, want["steps"])

    # the fleet tables' identity columns (docs/FLEET.md), first in every table
    IDENT = ["host", "model", "label_keys", "label_values", "capture_id", "pid", "tid",
             "version", "ingest_batch"]

    def fleet_value(col, v, shift):
        """A steps --json value as the fleet table writes it (docs/FLEET.md: no NULLs, epoch
        ns): the rule of model/columns.def, written again here from the docs."""
        if v is None:
            return {"step": -1}.get(col, "" if col in WORDS else 0)
        return v + shift if col in ("begin_ns", "mark_ns", "end_ns") and v else v

    WORDS = {"kind", "tokens_source", "anomaly", "top_class", "phase", "cause", "class"}

    def same_fleet_rows(table, keys, want, local, cap=None):
        """`table TABLE` of the capture cap (the gpu one) has the identity columns, then keys
        less the local ones in that order, and the values of want (rows with keys) row for
        row."""
        cap = cap or gpu
        rows = [json.loads(x) for x in
                cli("table", table, "--format", "json", "--compress", "none", cap).splitlines()]
        fleet_keys = [k for k in keys if k not in local]
        assert list(rows[0].keys()) == IDENT + fleet_keys, (list(rows[0].keys()), fleet_keys)
        assert len(rows) == len(want), (len(rows), len(want))
        meta = json.loads(cli("dump", "--type", "meta", cap).splitlines()[0])
        shift = meta["start_realtime_ns"] - meta["start_monotonic_ns"]
        for i, (w, g) in enumerate(zip(want, rows)):
            assert g["tid"] == w["tid"] and g["pid"] == w["pid"], (i, g, w)
            for k in fleet_keys:
                v = fleet_value(k, w[k], shift)
                assert g[k] == v, f"row {i} {k}: table {g[k]}, wanted {v} (API {w[k]})"

    @test
    def steps_one_table():
        """One description, three views: `steps --json`, the Python API and `table steps` give
        the same columns (the fleet's: less tid, pid and gap_ns, which it has elsewhere or
        cannot know live) in the same order, and the same values row for row."""
        want = cli_json("steps", "--json", gpu)["steps"]
        keys = list(want[0].keys())
        t = tokprof.open(gpu).steps()
        assert t.column_names == keys, (t.column_names, keys)
        same_rows(t, want)
        same_fleet_rows("steps", keys, want, ("tid", "pid", "gap_ns"))

    @test
    def step_classes_one_table():
        """One description, two views (no CLI view but `table`): the Python API's step_classes()
        and `table step_classes` give the same columns (the fleet's less tid and pid, identity
        columns there) in the same order and the same values row for row; each row's step
        columns are its step's in `steps --json`."""
        t = tokprof.open(gpu).step_classes()
        want = t.to_pylist()
        keys = t.column_names
        assert want and keys[:5] == ["thread", "tid", "pid", "seg", "step"], keys
        same_fleet_rows("step_classes", keys, want, ("tid", "pid"))
        steps = {(s["thread"], s["seg"]): s for s in cli_json("steps", "--json", gpu)["steps"]}
        for w in want:
            s = steps[(w["thread"], w["seg"])]
            for k in ("tid", "pid", "step", "tokens") + (("begin_ns",) if s["begin_ns"] else ()):
                assert w[k] == s[k], (k, w, s)
        assert sum(w["kernels"] for w in want) > 0 and any(w["tokens"] for w in want), want[:3]

    @test
    def moe_one_table():
        """One description, two views: the Python API's moe() and `table moe` give the same
        columns (the fleet's less tid and pid) in the same order and the same values row for
        row; the tokens routed are those of `tokprof moe --json` (another view: its expert_load
        per step and layer), and each row's step columns are its step's in `steps --json`.
        Fused expert kernels: no rows in either."""
        t = tokprof.open(moe).moe()
        want = t.to_pylist()
        keys = t.column_names
        assert want and keys[:4] == ["thread", "tid", "pid", "seg"], keys
        same_fleet_rows("moe", keys, want, ("tid", "pid"), cap=moe)
        load = {}
        for th in cli_json("moe", "--json", moe)["threads"]:
            for s in th["steps"]:
                for layer, loads in enumerate(s["expert_load"]):
                    for expert, n in enumerate(loads):
                        load[(th["thread"], s["step"], layer, expert)] = n
        got = {(w["thread"], w["seg"], w["layer"], w["expert"]): w["tokens"] for w in want}
        assert got == load and sum(got.values()) > 0, (len(got), len(load))
        steps = {(s["thread"], s["seg"]): s for s in cli_json("steps", "--json", moe)["steps"]}
        for w in want:
            s = steps[(w["thread"], w["seg"])]
            for k in ("tid", "pid", "step") + (("begin_ns",) if s["begin_ns"] else ()):
                assert w[k] == s[k], (k, w, s)
        assert any(w["expert_gpu_ns"] for w in want) and any(w["step"] is not None for w in want)
        assert tokprof.open(moe_fused).moe().num_rows == 0
        assert cli("table", "moe", "--format", "json", "--compress", "none", moe_fused) == ""
        try:  # experts are told apart by weight addresses: one process at a time, as `moe`
            tokprof.open(merged).moe()
            raise AssertionError("moe() of two processes")
        except tokprof.TokprofError as e:
            assert "one process at a time" in str(e), str(e)

    @test
    def calls_table_sums():
        """The fleet calls table (per hour and shape, every call counted) against `gemm --json`
        and the Python API's calls() (per shape over the capture, executed calls only): summed
        over the hours, the same FLOPs and GPU time per shape, and at least the calls and host
        time."""
        shape = ("lib", "op", "m", "n", "k", "batch", "atype", "btype", "ctype", "compute",
                 "transa", "transb")
        for cap in (gpu, moe):
            rows = [json.loads(x) for x in cli("table", "calls", "--format", "json",
                                               "--compress", "none", cap).splitlines()]
            got = {}
            for r in rows:
                c = got.setdefault(tuple(r[k] for k in shape), [0, 0, 0, 0])
                for i, k in enumerate(("flops", "gpu_ns", "calls", "host_ns")):
                    c[i] += r[k]
            api = tokprof.open(cap).calls().to_pylist()
            assert api and len(got) >= len(api), (cap, len(got), len(api))
            for a in api:
                g = got[tuple(a[k] for k in shape)]
                assert g[:2] == [a["flops"], a.get("gpu_ns") or 0], (cap, g, a)
                assert g[2] >= a["calls"] and g[3] >= a["host_ns"], (cap, g, a)
            assert any(a.get("gpu_ns") for a in api), cap

    @test
    def run_figures_from_the_steps():
        """ITL and the worst steps are derived once (model.h, model/figures.c): summary's ITL
        percentiles (nearest rank) are those of the steps' itl_ns, its worst steps the token
        steps of longest host_ns, with the steps' cause where the steps give one."""
        import math
        for cap in (gpu, merged):
            steps = cli_json("steps", "--json", cap)["steps"]
            summ = cli_json("summary", "--json", cap)
            v = sorted(s["itl_ns"] for s in steps if s["itl_ns"] is not None)
            assert v, cap
            pct = lambda p: v[min(len(v), max(1, math.ceil(p * len(v)))) - 1]
            want = {"p50": pct(0.5), "p90": pct(0.9), "p99": pct(0.99), "max": v[-1]}
            assert summ["itl_ns"] == want, (summ["itl_ns"], want)
            tok = sorted((s for s in steps if s["kind"] == "token"), key=lambda s: -s["host_ns"])
            worst = summ["worst_steps"]
            assert [w["host_ns"] for w in worst] == [s["host_ns"] for s in tok[:len(worst)]]
            for w in worst:
                s = next(s for s in tok if s["step"] == w["step"] and s["tid"] == w["tid"])
                assert s["cause"] in (None, w["cause"]), (s, w)

    @test
    def table_columns_documented():
        """docs/FLEET.md's tables (steps, step_classes, kernels, calls, moe) name the columns
        of `table TABLE --columns`, in order."""
        doc = open(os.path.join(A.src, "docs", "FLEET.md")).read()
        for table, end in (("steps", "### step_classes"), ("step_classes", "### kernels"),
                           ("kernels", "### calls"), ("calls", "### moe"),
                           ("moe", "## The schema")):
            part = doc[doc.index("### " + table + " "):doc.index(end)]
            names = []
            for line in part.splitlines():
                if line.startswith("| ") and not line.startswith("| column") and "---" not in line:
                    names += [n.strip() for n in line.split("|")[1].split(",")]
            cols = cli("table", table, "--columns").strip().split(", ")
            assert cols == IDENT + names, (table, cols, names)

    @test
    def kernels_one_table():
        """One description (model/columns.def), four views: `kernels --json` and `--csv` give the
        same columns and values, the Python API's kernels() the JSON's rows; `table kernels` has
        the CLI's columns less its local ones (base, mean_ns, share) after its hour_ns, in the
        same order, and summed over the hours each name's class, count, total_ns and (the
        largest of the hours') max_ns."""
        want = cli_json("kernels", "--json", gpu)["rows"]
        keys = list(want[0].keys())
        assert keys[-1] == "max_ns" and "p99_ns" in keys, keys
        assert tokprof.open(gpu).kernels().column_names == keys
        rows = list(csv.DictReader(io.StringIO(cli("kernels", "--csv", gpu))))
        assert len(rows) == len(want) and list(rows[0].keys()) == keys, (len(rows), rows[0])
        for i, (w, c) in enumerate(zip(want, rows)):
            v = {k: f"{x:.6f}" if isinstance(x, float) else str(x) for k, x in w.items()}
            assert c == v, f"row {i}:\n  csv  {c}\n  json {v}"
        fleet = [json.loads(x) for x in
                 cli("table", "kernels", "--format", "json", "--compress", "none", gpu).splitlines()]
        local = ("base", "mean_ns", "share")
        assert list(fleet[0].keys()) == IDENT + ["hour_ns"] + [k for k in keys if k not in local]
        got = {}
        for r in fleet:
            g = got.setdefault(r["name"], {"class": r["class"], "count": 0, "total_ns": 0,
                                           "max_ns": 0})
            assert g["class"] == r["class"], (g, r)
            g["count"] += r["count"]
            g["total_ns"] += r["total_ns"]
            g["max_ns"] = max(g["max_ns"], r["max_ns"])
        assert got == {w["name"]: {k: w[k] for k in ("class", "count", "total_ns", "max_ns")}
                       for w in want}, (got, want)

    @test
    def kernels_equal_cli():
        same_rows(tokprof.open(gpu).kernels(), cli_json("kernels", "--json", gpu)["rows"])
        same_rows(tokprof.open(gpu).kernels(by="class"),
                  cli_json("kernels", "--by", "class", "--json", gpu)["rows"])

    @test
    def kernels_table_sums():
        """The fleet kernels table (per hour and mangled name) sums, per class, to the count
        and GPU time of `kernels --by class` and the Python API's kernels(by="class")."""
        rows = [json.loads(x) for x in
                cli("table", "kernels", "--format", "json", "--compress", "none", gpu).splitlines()]
        got = {}
        for r in rows:
            c = got.setdefault(r["class"], [0, 0])
            c[0] += r["count"]
            c[1] += r["total_ns"]
        api = {r["class"]: [r["count"], r["total_ns"]]
               for r in tokprof.open(gpu).kernels(by="class").to_pylist()}
        assert got and got == api, (got, api)

    @test
    def summary_equal_cli():
        assert tokprof.open(gpu).summary() == cli_json("summary", "--json", gpu)

    @test
    def records_match_summary():
        cap = tokprof.open(gpu)
        s = cap.summary()
        launches = cap.records(types=["launch"])
        assert launches.num_rows == s["launches"], (launches.num_rows, s["launches"])
        assert launches.column("type").null_count == 0
        graphs = cap.records(types=["graph_launch"], columns=["graph", "host_ns"])
        assert graphs.column_names == ["graph", "host_ns"]
        assert graphs.num_rows == s["graph_launches"]
        k = cap.records(types=["gpu_kernel"], columns=["name", "start_ns", "end_ns"])
        total = cli_json("kernels", "--json", gpu)
        assert k.num_rows == total["kernels"], (k.num_rows, total["kernels"])
        import pyarrow.compute as pc
        dur = pc.sum(pc.subtract(k.column("end_ns"), k.column("start_ns"))).as_py()
        assert dur == total["total_ns"], (dur, total["total_ns"])
        every = cap.records()
        assert every.column_names == tokprof.RECORD_COLUMNS
        types = set(every.column("type").to_pylist())
        assert {"chunk", "meta", "launch", "gpu_kernel", "step"} <= types, types

    @test
    def step_classes_match_top_class():
        cap = tokprof.open(gpu)
        sc = cap.step_classes().to_pylist()
        best = {}
        for r in sc:
            k = (r["thread"], r["seg"])
            if k not in best or r["gpu_ns"] > best[k][1]:
                best[k] = (r["class"], r["gpu_ns"])
        for s in cap.steps().to_pylist():
            if s["top_class"] is not None:
                assert best[(s["thread"], s["seg"])][0] == s["top_class"], s

    @test
    def calls_equal_cli():
        same_rows(tokprof.open(gpu).calls(), cli_json("gemm", "--json", gpu)["shapes"])

    @test
    def merged_directory():
        cap = tokprof.open(merged)
        t = cap.steps()
        same_rows(t, cli_json("steps", "--json", merged)["steps"])
        assert len(set(t.column("pid").to_pylist())) == 2
        assert cap.summary() == cli_json("summary", "--json", merged)
        files = sorted(os.path.join(merged, f) for f in os.listdir(merged))
        same_rows(tokprof.open(files).steps(), cli_json("steps", "--json", *files)["steps"])

    @test
    def torn_capture():
        # mkcapture's: two whole chunks, then a third cut short (a killed program's)
        torn = os.path.join(A.work, "torn.tokprof")
        subprocess.run([A.mkcapture, "torn", torn], check=True)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            cap = tokprof.open(torn)
            t = cap.steps()
            r = cap.records()
        msgs = [str(x.message) for x in w]
        assert len(msgs) == 2 and all(m.startswith(torn + ": torn tail at byte ") for m in msgs), msgs
        same_rows(t, cli_json("steps", "--json", torn)["steps"])
        import pyarrow.compute as pc
        chunks = r.filter(pc.equal(r.column("type"), "chunk")).num_rows
        assert chunks == cli_json("summary", "--json", torn)["chunks"] == 2, chunks

    @test
    def check_spec():
        ok = tokprof.check(os.path.join(A.src, "tests/e2e/python/attn.tks"), clean)
        assert ok.passed and ok.assertions and not ok.violations, ok
        bad = tokprof.check(os.path.join(A.src, "tests/e2e/spec/fail/attn_count.tks"),
                            tokprof.open(clean))
        assert not bad.passed and bad.violations, bad
        assert bad.assertions[0]["assert"] == "attn_count", bad.assertions

    @test
    def step_markers_loop():
        iters = 7
        d = capture("loop", str(iters), env={"TOKPROF_STEP": "marker", "PYTHONPATH":
                                             os.path.join(A.src, "python")},
                    prog=[sys.executable, os.path.join(A.src, "tests/e2e/python/step_loop.py")])
        t = tokprof.open(d).steps().to_pylist()
        tokens = [s for s in t if s["kind"] == "token"]
        assert len(tokens) == iters, t
        assert all(s["launches"] >= 1 for s in tokens), tokens


@test
def kernels_without_gpu():
    """A capture without GPU records (tests/data/arch/golden.tokprof: a kernel name holds quotes):
    `kernels --json` rows carry only the columns that are not GPU ones (name, base, class, count
    by name; class, count by class), counts of launches; `--csv` reads back (RFC 4180) to the
    JSON's values; kernels() is the JSON's rows; `table kernels` has no row (it is per GPU hour)."""
    cap = os.path.join(A.src, "tests", "data", "arch", "golden.tokprof")
    for by, keys in (("name", ["name", "base", "class", "count"]), ("class", ["class", "count"])):
        j = cli_json("kernels", "--by", by, "--json", cap)
        assert not j["gpu"]["available"] and j["rows"], j
        assert all(list(r) == keys for r in j["rows"]), (by, j["rows"])
        assert sum(r["count"] for r in j["rows"]) == j["kernels"], j
        rows = list(csv.DictReader(io.StringIO(cli("kernels", "--by", by, "--csv", cap))))
        want = [{k: str(v) for k, v in r.items()} for r in j["rows"]]
        assert rows == want, (by, rows, want)
        assert tokprof.open(cap).kernels(by=by).to_pylist() == j["rows"], by
    assert any('"' in r["name"] for r in cli_json("kernels", "--json", cap)["rows"])
    assert cli("table", "kernels", "--format", "json", "--compress", "none", cap) == ""


@test
def bad_input_raises():
    for path, why in (("/etc/hostname", "not a tokprof capture"),
                      (os.path.join(A.work, "missing.tokprof"), "")):
        try:
            tokprof.open(path)
        except tokprof.TokprofError as e:
            assert str(e).startswith(path + ":") and why in str(e), str(e)
        else:
            raise AssertionError(f"{path}: no exception")
    empty = os.path.join(A.work, "empty")
    os.makedirs(empty, exist_ok=True)
    try:
        tokprof.open(empty)
        raise AssertionError("an empty directory opened")
    except tokprof.TokprofError as e:
        assert empty in str(e), str(e)
    try:
        tokprof.open(A.lib).records(types=["nope"])
    except (tokprof.TokprofError, ValueError):
        pass


@test
def fuzz_corpus_never_crashes():
    corpus = os.path.join(A.src, "tests/fuzz/corpus/reader")
    n = raised = 0
    for name in sorted(os.listdir(corpus)):
        path = os.path.join(corpus, name)
        n += 1
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                cap = tokprof.open(path)
                cap.records()
                cap.steps()
                cap.step_classes()
                cap.moe()
                cap.summary()
        except tokprof.TokprofError as e:
            assert str(e), name
            raised += 1
    assert n > 10, n
    print(f"     {n} corpus files, {raised} raised TokprofError")


@test
def markers_are_noops_without_shim():
    assert tokprof.step_begin is tokprof._noop and tokprof.step_end is tokprof._noop
    with tokprof.step():
        pass


print(f"{passed} passed, {len(failed)} failed")
sys.exit(1 if failed else 0)
