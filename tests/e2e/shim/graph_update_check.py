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

A fourth run ("between") encodes the first replay's GPU records before the update instead: the
program pauses after its first token (RT_GGML_PAUSE), TOKPROF_FLUSH_MS=1 has CUPTI and the
writer deliver them within a few milliseconds, and the test waits until the capture on disk holds
them before it lets the program go on. The writer's graph-node cache (gpuenc.c) then holds the
first version's ids when the update adds the second: the replay after it must still join the
new version's nodes. The wait is for that condition (60 s at most, then a failure), not a time.

usage: graph_update_check.py PROG SHIM TOKPROF SIMGPU_DIR WORKDIR
"""
import collections
import json
import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", ".."))
from preload import shim_preload  # noqa: E402  (tests/preload.py)

prog, shim, tokprof, simgpu, work = sys.argv[1:6]
errors = []


def encoded_first_replay(d):
    """1 when the capture being written in d holds a GPU record of the first graph's nodes."""
    caps = [c for c in os.listdir(d) if c.endswith(".tokprof")]
    if len(caps) != 1:
        return 0
    out = subprocess.run([tokprof, "dump", "--type", "gpu_kernel", os.path.join(d, caps[0])],
                         capture_output=True, text=True, timeout=60).stdout  # a torn last chunk: ok
    return any(json.loads(l).get("graph") == 0 for l in out.splitlines() if l.startswith("{"))


def run(d, env_extra, under_shim, between=False):
    os.makedirs(d)
    env = dict(os.environ, LD_LIBRARY_PATH=simgpu, SIMGPU_LOG=os.path.join(d, "truth.jsonl"), **env_extra)
    env.pop("LD_PRELOAD", None)
    if under_shim:
        env.update(LD_PRELOAD=shim_preload(shim), TOKPROF_OUT=d,
                   TOKPROF_FLUSH_MS="1" if between else "600000")
    if not between:
        p = subprocess.run([prog], env=env, capture_output=True, text=True, timeout=120)
        return p.returncode, p.stdout
    env["RT_GGML_PAUSE"] = "1"
    p = subprocess.Popen([prog], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    first = ""
    while not first.endswith("paused\n"):
        line = p.stdout.readline()
        if not line:
            break
        first += line
    waited = time.monotonic()
    while under_shim and first.endswith("paused\n") and not encoded_first_replay(d):
        if time.monotonic() - waited > 60:
            errors.append("between: the first replay's GPU records were not written within 60 s")
            break
        time.sleep(0.01)
    out, _ = p.communicate("go\n", timeout=120)
    return p.returncode, first + out


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
                          ("refused", "reinstantiated", {"SIMGPU_GRAPH_UPDATE": "fail"}),
                          ("between", "in-place", {})):
    plain = run(os.path.join(work, name, "plain"), extra, False, name == "between")
    shimmed = run(os.path.join(work, name, "shim"), extra, True, name == "between")
    if plain != shimmed or plain[0] != 0 or f"update={mode}" not in plain[1]:
        errors.append(f"{name}: without the shim {plain}, under it {shimmed}")
        continue
    check(os.path.join(work, name, "shim"), name)

for e in errors:
    print("FAIL:", e)
print("PASS" if not errors else "FAILED")
sys.exit(1 if errors else 0)
