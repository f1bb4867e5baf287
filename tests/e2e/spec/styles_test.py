#!/usr/bin/env python3
"""For each minillm --style, a spec that holds on a clean run and fails, with the right witness,
when simgpu injects the fault it guards against. The faulted steps are computed independently
from minillm's own --log (cumulative executions of the faulted kernel per step), and the
violations must name exactly those steps (every one of them, and no other).

usage: styles_test.py BUILD_DIR SRC_DIR WORKDIR"""
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
STEPS = 12

# style -> (fault env, substring of the faulted kernel, rule giving the faulted executions)
CASES = {
    "vllm": ({"SIMGPU_SLOW": "paged_attention_decode:20:200"}, "paged_attention_decode",
             lambda n: n >= 20),
    "llamacpp": ({"SIMGPU_STALL": "50:200000000:rms_norm"}, "rms_norm",
                 lambda n: n > 0 and n % 50 == 0),
    "hf": ({"SIMGPU_SLOW": "MeanOps:45:100"}, "MeanOps", lambda n: n >= 45),
}


def capture(style, name, env_extra):
    d = os.path.join(work, f"{style}_{name}")
    os.makedirs(d)
    env = dict(os.environ, LD_LIBRARY_PATH=SIM, LD_PRELOAD=shim_preload(SHIM), TOKPROF_OUT=d,
               **env_extra)
    log = os.path.join(d, "minillm.jsonl")
    subprocess.run([MINILLM, "--style", style, "--steps", str(STEPS), "--log", log], env=env,
                   check=True, stdout=subprocess.DEVNULL)
    return glob.glob(os.path.join(d, "*.tokprof"))[0], log


def faulted_tokens(log, sub, rule):
    """Token steps containing a faulted execution (executions counted from 0 over the run,
    set-up included, as simgpu counts them)."""
    n, out = 0, set()
    for line in open(log):
        m = json.loads(line)
        k = sum(c for name, c in m.get("kernel_counts", {}).items() if sub in name)
        hit = any(rule(i) for i in range(n, n + k))
        n += k
        if m["type"] == "step" and hit:
            out.add(m["step"])
    return out


failures = []
for style, (fault, sub, rule) in CASES.items():
    spec = os.path.join(src, "styles", f"{style}.tks")
    clean, _ = capture(style, "clean", {})
    bad, log = capture(style, "fault", fault)
    p = subprocess.run([TKP, "check", spec, clean], capture_output=True, text=True)
    if p.returncode != 0:
        failures.append(f"{style}: clean run violates {spec}: exit {p.returncode}\n{p.stdout}")
    p = subprocess.run([TKP, "check", "--json", spec, bad], capture_output=True, text=True)
    vio = [json.loads(l) for l in p.stdout.splitlines() if '"type":"violation"' in l]
    want = faulted_tokens(log, sub, rule)
    got = {v["token"] for v in vio}
    if p.returncode != 1 or got != want:
        failures.append(f"{style}: fault run: exit {p.returncode}, violations at tokens "
                        f"{sorted(got)}, want {sorted(want)}")
    # the witness names the faulted kernel (its records, or the longest kernels of the step)
    for v in vio:
        names = [w.get("name", "") for w in v.get("witness", [])]
        if style != "llamacpp" and not any(sub in n for n in names):
            failures.append(f"{style}: witness of token {v['token']} lacks {sub}: {names}")
    print(f"{style}: clean passes; fault {fault} flagged tokens {sorted(got)} (expected "
          f"{sorted(want)})")
for f in failures:
    print("FAIL:", f)
sys.exit(1 if failures else 0)
