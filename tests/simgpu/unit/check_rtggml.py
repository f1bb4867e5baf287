#!/usr/bin/env python3
"""Runs rt_ggml (the runtime calls llama.cpp's ggml-cuda makes) on the simulated GPU three times:
as is (cudaGraphExecUpdate updates the exec in place), with RT_GGML_DRIVER_UPDATE=1 (the same
through the driver's cuGraphExecUpdate) and with SIMGPU_GRAPH_UPDATE=fail (the update is refused
and the program instantiates again, as llama.cpp does). Checks its output, its truth log
(names, grids, via, which exec and nodes replay after the update) and truth.py check.

usage: check_rtggml.py PROG TRUTH_PY
"""
import json
import os
import subprocess
import sys
import tempfile

prog, truth = sys.argv[1], sys.argv[2]
fail = []
MMVQ, NORM, SOFT = "_Z13mul_mat_vec_qPfi", "_Z12rms_norm_f32Pfi", "_Z29soft_max_f32_parallelize_colsPfi"
WANT = [("kernel", MMVQ, [7, 1, 1], "runtime"), ("kernel", SOFT, [3, 1, 1], "runtime"),
        ("kernel", NORM, [1, 1, 1], "graph"), ("kernel", MMVQ, [2, 1, 1], "graph"),
        ("copy", "memcpy", [0, 0, 0], "runtime"),
        ("kernel", NORM, [3, 1, 1], "graph"), ("kernel", MMVQ, [5, 1, 1], "graph"),
        ("copy", "memcpy", [0, 0, 0], "runtime")]

for run, mode, extra in (("runtime", "in-place", {}), ("driver", "in-place", {"RT_GGML_DRIVER_UPDATE": "1"}),
                        ("refused", "reinstantiated", {"SIMGPU_GRAPH_UPDATE": "fail"})):
    with tempfile.TemporaryDirectory() as tmp:
        log = os.path.join(tmp, "truth.jsonl")
        env = dict(os.environ, SIMGPU_LOG=log, LD_BIND_NOW="1", **extra)
        env.pop("SIMGPU_COST", None)
        r = subprocess.run([prog], env=env, capture_output=True, text=True)
        sys.stdout.write(r.stdout)
        sys.stderr.write(r.stderr)
        if r.returncode != 0 or "OK" not in r.stdout or f"update={mode}" not in r.stdout:
            fail.append(f"{run}: exit {r.returncode}, want update={mode} and OK")
        if "ptxVersion=90" not in r.stdout:
            fail.append(f"{run}: ptxVersion is not 90")
        if "unimplemented" in r.stderr:
            fail.append(f"{run}: a call the fakes do not simulate")
        recs = [json.loads(line) for line in open(log)] if os.path.exists(log) else []
        got = [(x["kind"], x["name"], x["grid"], x["via"]) for x in recs]
        if got != WANT:
            fail.append(f"{run}: truth log\n  got    {got}\n  expect {WANT}")
            continue
        if recs[4]["dir"] != "DtoH" or recs[7]["dir"] != "DtoH":
            fail.append(f"{run}: the logits copies are not DtoH")
        same_exec = recs[2]["graph_exec"] == recs[5]["graph_exec"]
        same_nodes = [recs[2]["graph_node"], recs[3]["graph_node"]] == [recs[5]["graph_node"], recs[6]["graph_node"]]
        if mode == "in-place" and not (same_exec and same_nodes):
            fail.append("in-place: the updated exec replays as another exec or other nodes")
        if mode == "reinstantiated" and (same_exec or same_nodes):
            fail.append("reinstantiated: the new exec replays under the old exec's ids")
        c = subprocess.run([sys.executable, truth, "check", log], capture_output=True, text=True)
        if c.returncode != 0:
            fail.append(f"{run}: truth.py check: {c.stdout}{c.stderr}")

for f in fail:
    print("FAIL:", f)
print("PASS" if not fail else "FAILED")
sys.exit(1 if fail else 0)
