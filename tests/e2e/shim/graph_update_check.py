#!/usr/bin/env python3
"""An exec updated in place (cudaGraphExecUpdate) or destroyed and instantiated again at the same
handle replays its new topology, and the capture says so: runs tests/simgpu's rt_ggml (llama.cpp's
graph path in miniature: capture, replay, re-capture with new grids, update or re-instantiate,
replay) without and under the shim, three ways: updated through the runtime, through the driver
(cuGraphExecUpdate from cudaGetDriverEntryPointByVersion: the shim's cuGetProcAddress wrapper), and
refused (SIMGPU_GRAPH_UPDATE=fail: destroyed and instantiated again).

TOKPROF_FLUSH_MS is 10 minutes, so the writer encodes everything at exit, after the update: a
launch must be expanded into the topology its exec had when it was launched, not the one it has
when the writer gets to it. Checks: same stdout and exit status; per thread, the kernels the
simulator ran (name and grid, in order) are the capture's launches with graph launches expanded;
every GPU record of a graph node names a node of the recorded topology with its own grid;
gpu_compare.py (exact times, joins).

usage: graph_update_check.py PROG SHIM TOKPROF SIMGPU_DIR WORKDIR
"""
import collections
import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", ".."))
from preload import shim_preload  # noqa: E402  (tests/preload.py)

prog, shim, tokprof, simgpu, work = sys.argv[1:6]
errors = []


def run(d, env_extra, under_shim):
    os.makedirs(d)
    env = dict(os.environ, LD_LIBRARY_PATH=simgpu, SIMGPU_LOG=os.path.join(d, "truth.jsonl"), **env_extra)
    env.pop("LD_PRELOAD", None)
    if under_shim:
        env.update(LD_PRELOAD=shim_preload(shim), TOKPROF_OUT=d, TOKPROF_FLUSH_MS="600000")
    p = subprocess.run([prog], env=env, capture_output=True, text=True, timeout=120)
    return p.returncode, p.stdout


def load(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def check(d, mode):
    caps = [c for c in os.listdir(d) if c.endswith(".tokprof")]
    if len(caps) != 1:
        errors.append(f"{mode}: {len(caps)} captures")
        return
    dump_path = os.path.join(d, "dump.jsonl")
    with open(dump_path, "w") as out:
        subprocess.run([tokprof, "dump", os.path.join(d, caps[0])], stdout=out, check=True, timeout=60)
    dump, truth = load(dump_path), load(os.path.join(d, "truth.jsonl"))
    graphs = {r["graph"]: r["nodes"] for r in dump if r["type"] == "graph"}
    if len(graphs) != 2:
        errors.append(f"{mode}: {len(graphs)} graph topologies recorded, want 2 (before and after)")
    want = collections.defaultdict(list)
    for r in dump:
        if r["type"] == "launch":
            want[r["tid"]].append((r["name"], r["grid"]))
        elif r["type"] == "graph_launch":
            want[r["tid"]] += [(n["name"], n["grid"]) for n in graphs.get(r["graph"], []) if n["type"] == "kernel"]
    ran = collections.defaultdict(list)
    for t in truth:
        if t["kind"] == "kernel":
            ran[t["tid"]].append((t["name"], t["grid"]))
    if dict(want) != dict(ran):
        errors.append(f"{mode}: kernels ran {dict(ran)}\n  the capture has {dict(want)}")
    nodes = {(g, n["node"]): n for g, ns in graphs.items() for n in ns}
    for r in dump:
        if r["type"] == "gpu_kernel" and r["graph"] is not None:
            n = nodes.get((r["graph"], r["node"]))
            if not n or (n["name"], n["grid"]) != (r["name"], r["grid"]):
                errors.append(f"{mode}: GPU record {r['name']} grid {r['grid']} joined to node "
                              f"{r['graph']}/{r['node']} = {n and (n['name'], n['grid'])}")
    g = subprocess.run([sys.executable, os.path.join(HERE, "..", "gpu_compare.py"), dump_path,
                        os.path.join(d, "truth.jsonl")], capture_output=True, text=True, timeout=60)
    if g.returncode != 0:
        errors.append(f"{mode}: gpu_compare: {g.stdout.strip()}")


shutil.rmtree(work, ignore_errors=True)
for name, mode, extra in (("runtime", "in-place", {}), ("driver", "in-place", {"RT_GGML_DRIVER_UPDATE": "1"}),
                          ("refused", "reinstantiated", {"SIMGPU_GRAPH_UPDATE": "fail"})):
    plain = run(os.path.join(work, name, "plain"), extra, False)
    shimmed = run(os.path.join(work, name, "shim"), extra, True)
    if plain != shimmed or plain[0] != 0 or f"update={mode}" not in plain[1]:
        errors.append(f"{name}: without the shim {plain}, under it {shimmed}")
        continue
    check(os.path.join(work, name, "shim"), name)

for e in errors:
    print("FAIL:", e)
print("PASS" if not errors else "FAILED")
sys.exit(1 if errors else 0)
