#!/usr/bin/env python3
"""Live commands (tokprof top, serve, check --follow) on programs running on the simulated GPU.

usage: live_test.py CASE --build DIR --tmp DIR [--venv DIR]

Cases:
  errors   bad input: a missing directory, a file that is not a capture, a port in use, a spec
           with run-level assertions: one line, exit 2; a capture whose writer died mid-chunk is
           followed up to its last whole chunk
  run      minillm with a kernel class slowed from an early step (SIMGPU_SLOW), followed while it
           runs by `serve --prometheus` (scraped, parsed by prometheus_client's parser in a venv),
           `check --follow` (a violation while the program still runs; --exit-on-violation exits
           1) and `top --once` (its pid, tokens/s within 5 % of minillm's own figure, the slowed
           class on top)
  rotate   check --follow over a rotating capture (TOKPROF_MAX_MB): the same violations as the
           offline check of the finished files, none missed or seen twice
  fork     the same over a forking program's two captures (parent and child)
  days     a capture rotated 1,000 times under `check --follow` and `top`: peak RSS at the start
           and at the end, flat
  tmux     the interactive `top` in a real terminal (tmux): switch views, pause, quit, and the
           shell is usable after

Tests wait on conditions with generous timeouts, never on sleeps; timing figures (the lag of a
violation behind its step) are logged, not asserted against tight bounds."""
import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from preload import shim_preload, foreign_host  # noqa: E402

A = None
FAILS = []


def fail(msg):
    print("FAIL:", msg, flush=True)
    FAILS.append(msg)


def check(cond, msg):
    if not cond:
        fail(msg)
    return cond


def log(*a):
    print(*a, flush=True)


def tk():
    return os.path.join(A.build, "decoder", "tokprof")


def sim_env(outdir, **extra):
    env = dict(os.environ)
    sim = os.path.join(A.build, "tests", "simgpu")
    env["LD_LIBRARY_PATH"] = sim + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
    env["LD_PRELOAD"] = shim_preload(os.path.join(A.build, "shim", "libtokprof.so"))
    env["TOKPROF_OUT"] = outdir
    env.update({k: str(v) for k, v in extra.items()})
    return env


def run(args, timeout=300, **kw):
    p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=timeout, **kw)
    return p.returncode, p.stdout, p.stderr


def wait_for(cond, timeout, what, step=0.05):
    """Polls cond() until it returns a true value; fails after timeout seconds."""
    end = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > end:
            fail(f"timed out after {timeout}s waiting for {what}")
            return None
        time.sleep(step)


def fresh(name):
    d = os.path.join(A.tmp, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    return d


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def hwm_kb(pid):
    """Peak RSS (VmHWM) of a running process, in kB."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


class Lines:
    """Reads a process's stdout lines in a thread, each with its arrival time (CLOCK_MONOTONIC)."""

    def __init__(self, proc, watch=None):
        self.lines = []
        self.lock = threading.Lock()
        self.watch = watch
        self.t = threading.Thread(target=self._read, args=(proc,), daemon=True)
        self.t.start()

    def _read(self, proc):
        for line in proc.stdout:
            running = self.watch.poll() is None if self.watch else None
            with self.lock:
                self.lines.append((time.monotonic(), running, line.rstrip("\n")))

    def snapshot(self):
        with self.lock:
            return list(self.lines)


def offline_violations(spec, path):
    """{assertion: violations} of the offline `tokprof check --json` of finished files."""
    rc, out, err = run([tk(), "check", "--json", spec, path])
    res = {}
    for line in out.splitlines():
        try:
            o = json.loads(line)
        except ValueError:
            continue
        if o.get("type") == "assertion":
            res[o["assert"]] = o["violations"]
    if not res:
        fail(f"offline check of {path}: exit {rc}, no assertion lines\n{out[-2000:]}{err[-2000:]}")
    return res


# ---- errors ------------------------------------------------------------------------------------

def one_line_exit2(args, want, what):
    rc, out, err = run(args, timeout=60)
    lines = [x for x in err.splitlines() if x.strip()]
    check(rc == 2, f"{what}: exit {rc}, expected 2 ({err.strip()})")
    check(len(lines) == 1, f"{what}: expected one line on stderr, got {lines}")
    check(re.search(want, err), f"{what}: stderr {err.strip()!r} does not say {want!r}")
    log(f"{what}: exit {rc}: {err.strip()}")


def case_errors():
    d = fresh("errors")
    missing = os.path.join(d, "no-such-dir")
    text = os.path.join(d, "notes.tokprof")
    with open(text, "w") as f:
        f.write("not a capture\n")
    spec = os.path.join(d, "ok.tks")
    with open(spec, "w") as f:
        f.write("assert short [step]: s.dur <= 10s;\n")
    runspec = os.path.join(d, "run.tks")
    with open(runspec, "w") as f:
        f.write("assert p99 [run]: p99(s.dur) <= 10ms;\n")
    port = free_port()
    for name, args in (("top", [tk(), "top", "--once"]),
                       ("serve", [tk(), "serve", "--prometheus", f"127.0.0.1:{port}"]),
                       ("check --follow", [tk(), "check", "--follow", spec])):
        one_line_exit2(args + [missing], "No such file or directory", f"{name} on a missing directory")
        one_line_exit2(args + [text], "not a tokprof capture", f"{name} on a text file")
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen(1)
    busy = holder.getsockname()[1]
    one_line_exit2([tk(), "serve", "--prometheus", f"127.0.0.1:{busy}", d], "Address already in use",
                   "serve on a port in use")
    holder.close()
    one_line_exit2([tk(), "check", "--follow", runspec, d], "over the whole run",
                   "check --follow with a run-level assertion")

    # a writer killed mid-chunk: its capture is followed up to the last whole chunk, then ends
    cap_dir = fresh("errors_torn")
    rc, out, err = run([os.path.join(A.build, "kernels", "minillm"), "--steps", "40"],
                       env=sim_env(cap_dir, TOKPROF_FLUSH_MS=20))
    caps = [f for f in os.listdir(cap_dir) if f.endswith(".tokprof")]
    if not check(rc == 0 and len(caps) == 1, f"minillm for the torn capture: exit {rc}, files {caps}\n{err}"):
        return
    path = os.path.join(cap_dir, caps[0])
    size = os.path.getsize(path)
    with open(path, "r+b") as f:
        f.truncate(size - 7)  # the last chunk's last bytes never made it
    rc, whole, _ = run([tk(), "summary", "--json", path])
    want_steps = json.loads(whole)["steps"]
    rc, out, err = run([tk(), "check", "--follow", spec, path], timeout=60)
    check(rc == 0, f"check --follow on a torn capture of a dead writer: exit {rc}\n{err}")
    check("torn tail" in err, f"check --follow: no torn-tail warning: {err!r}")
    rc, out, err = run([tk(), "top", "--once", path], timeout=60)
    m = re.search(r"tokens \d+\s+steps (\d+)", out)
    check(rc == 0 and m and int(m.group(1)) == want_steps,
          f"top --once on a torn capture: exit {rc}, steps {m and m.group(1)}, the offline reader "
          f"reads {want_steps}\n{out}{err}")
    log(f"torn capture: followed {m and m.group(1)} token steps, offline {want_steps}")


# ---- run: serve, check --follow and top --once during a minillm run ----------------------------

SLOW_CLASS = "norm"
SLOW_KERNEL = "fused_add_rms_norm"


def prom_parse(text):
    """Families of a scrape, parsed by prometheus_client's own parser (in the venv)."""
    py = os.path.join(A.venv, "bin", "python")
    code = ("import json,sys\n"
            "from prometheus_client.parser import text_string_to_metric_families as p\n"
            "out=[]\n"
            "for fam in p(sys.stdin.read()):\n"
            "    for s in fam.samples:\n"
            "        out.append([fam.name, fam.type, s.name, s.labels, s.value])\n"
            "print(json.dumps(out))\n")
    p = subprocess.run([py, "-c", code], input=text, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, timeout=60, env=foreign_host(dict(os.environ)))
    if p.returncode != 0:
        fail(f"prometheus_client could not parse the scrape: {p.stderr[-2000:]}")
        return []
    return json.loads(p.stdout)


def scrape(port):
    p = subprocess.run(["curl", "-s", "--max-time", "10", f"http://127.0.0.1:{port}/metrics"],
                       stdout=subprocess.PIPE, text=True, timeout=30)
    return p.stdout if p.returncode == 0 else ""


def sample(samples, name, pid, **labels):
    tot = None
    for fam, typ, sname, lab, val in samples:
        if sname == name and lab.get("pid") == str(pid) and all(lab.get(k) == v for k, v in labels.items()):
            tot = (tot or 0) + val
    return tot


def file_token_steps(path):
    """Token steps in the whole chunks written so far (the offline reader)."""
    rc, out, err = run([tk(), "summary", "--json", path])
    try:
        return json.loads(out)["steps"]
    except (ValueError, KeyError):
        return None


def case_run():
    if not A.venv or not os.path.exists(os.path.join(A.venv, "bin", "python")):
        fail("no venv with prometheus_client (--venv)")
        return
    d = fresh("run")
    spec = os.path.join(A.tmp, "run_slow.tks")
    with open(spec, "w") as f:
        f.write("// the slowed steps take ~25 ms; clean ones ~2 ms (more under ASan)\n"
                "assert step_deadline [step]: s.dur <= 12ms;\n")
    port = free_port()
    serve = subprocess.Popen([tk(), "serve", "--prometheus", f"127.0.0.1:{port}", "--label", "env=ci",
                              "--spec", spec, d],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_for(lambda: scrape(port) != "" or serve.poll() is not None, 60, "serve to listen")
    # norm kernels (9 per step) take 2000x their time from step ~5: ~25 ms per step, ~30 s in all
    # (so that it still runs when the checks below look, however loaded the machine)
    mini = subprocess.Popen([os.path.join(A.build, "kernels", "minillm"), "--steps", "1200"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=sim_env(d, TOKPROF_FLUSH_MS=50, SIMGPU_SLOW=f"{SLOW_KERNEL}:45:2000"))
    follow = subprocess.Popen([tk(), "check", "--follow", spec, d], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    fl = Lines(follow, watch=mini)
    stop1 = subprocess.Popen([tk(), "check", "--follow", "--json", "--exit-on-violation", spec, d],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    sl = Lines(stop1, watch=mini)
    pid = mini.pid
    path = os.path.join(d, f"minillm.{pid}.tokprof")

    # serve: the histogram's count reaches the token steps on disk and never passes them
    prev = {}
    scrapes = 0
    while mini.poll() is None and scrapes < 5:
        n0 = file_token_steps(path) if os.path.exists(path) else None
        if not n0:
            time.sleep(0.1)
            continue
        got = {}

        def caught_up():
            s = prom_parse(scrape(port))
            c = sample(s, "tokprof_token_step_duration_seconds_count", pid)
            got["s"] = s
            return c is not None and c >= n0
        if not wait_for(caught_up, 30, f"serve's step histogram to reach the {n0} steps on disk"):
            break
        n1 = file_token_steps(path)
        s = got["s"]
        cnt = sample(s, "tokprof_token_step_duration_seconds_count", pid)
        check(cnt <= n1, f"serve counts {cnt} token steps, the file holds {n1}")
        buckets = sorted((float(lab["le"]), v) for fam, typ, sname, lab, v in s
                         if sname == "tokprof_token_step_duration_seconds_bucket" and lab.get("pid") == str(pid))
        check(buckets and buckets[-1][0] == float("inf") and buckets[-1][1] == cnt and
              all(a[1] <= b[1] for a, b in zip(buckets, buckets[1:])),
              f"histogram buckets not cumulative up to +Inf = count {cnt}: {buckets}")
        check(sample(s, "tokprof_token_steps_total", pid, env="ci") == cnt,
              "tokprof_token_steps_total (with --label env=ci) differs from the histogram's count")
        for fam, typ, sname, lab, val in s:
            if typ in ("counter", "histogram") and lab.get("pid") == str(pid):
                key = (sname, tuple(sorted(lab.items())))
                check(val >= prev.get(key, 0), f"counter {key} went down: {prev.get(key)} -> {val}")
                prev[key] = val
        log(f"scrape {scrapes}: {n0} <= histogram count {cnt} <= {n1} token steps on disk")
        scrapes += 1
    check(scrapes >= 2, f"only {scrapes} scrapes while minillm ran")

    # top --once while it runs, once 90 % of its steps are done (~3 s before its end): a 60 s
    # window then holds nearly all of the run, whose tokens/s minillm prints at the end (a
    # shorter window would see the machine's load of the moment, not the run's)
    frame = {}

    def slowed_on_top():
        rc, out, err = run([tk(), "top", "--once", "--window", "60", d], timeout=60)
        m = re.search(r"top classes by GPU time:\s+(\S+)", out)
        s = re.search(rf"minillm pid {pid}\s+([\d.]+)", out)
        n = re.search(r"tokens \d+\s+steps (\d+)", out)
        frame.update(out=out, cls=m and m.group(1), tok=s and float(s.group(1)), running=mini.poll() is None)
        return (m and m.group(1) == SLOW_CLASS and s and n and int(n.group(1)) >= 1080 and "(ended)" not in out) \
            or not frame["running"]
    wait_for(slowed_on_top, 120, f"top --once to show {SLOW_CLASS} on top and 1080 steps while minillm runs",
             step=0.2)
    log("top --once during the run:\n" + frame.get("out", ""))
    check(frame.get("running"), "minillm had ended when top --once was taken")
    check(stop1.poll() == 1 and mini.poll() is None,
          f"check --follow --exit-on-violation has not exited 1 ({stop1.poll()}) while minillm runs")

    out, _ = mini.communicate(timeout=300)
    log(out.strip())
    m = re.search(r"= ([\d.]+) tokens/s", out)
    if check(m and frame.get("tok"), "no tokens/s from minillm or top"):
        own = float(m.group(1))
        rel = abs(frame["tok"] - own) / own
        log(f"tokens/s: top --once {frame['tok']:.1f}, minillm {own:.1f} ({rel * 100:.1f} % apart)")
        check(rel <= 0.05, f"top's tokens/s {frame['tok']} is {rel * 100:.1f} % from minillm's {own}")

    # check --follow: a violation while minillm still ran; it exits 1 once minillm has ended
    rc = follow.wait(timeout=120)
    fl.t.join(timeout=30)
    err = follow.stderr.read()
    lines = fl.snapshot()
    viol = [x for x in lines if x[2].startswith("violation:")]
    check(rc == 1, f"check --follow: exit {rc}, expected 1\n{err}")
    if check(viol, "check --follow printed no violation"):
        t, running, line = viol[0]
        check(running, "check --follow's first violation came after minillm had ended")
        m = re.search(r"\.\. ([\d.]+) s\]", line)
        if m:
            log(f"first violation {t - float(m.group(1)):.3f} s after its step ended (flush period 0.050 s): {line}")
    rc1 = stop1.wait(timeout=120)
    sl.t.join(timeout=30)
    js = [x for x in sl.snapshot() if x[2].startswith("{")]
    check(rc1 == 1 and js and js[0][1], f"check --follow --exit-on-violation: exit {rc1}, "
          f"{len(js)} lines, minillm running at the first: {js and js[0][1]}")
    if js:
        o = json.loads(js[0][2])
        check(o.get("assertion") == "step_deadline" and o.get("pid") == pid, f"JSON violation: {o}")

    # at the end: serve's class counters add up to the GPU time of `tokprof steps` (one stream:
    # kernel time = busy time), its busy counter too
    wait_for(lambda: (sample(prom_parse(scrape(port)), "tokprof_process_running", pid) == 0), 60,
             "serve to see minillm end")
    s = prom_parse(scrape(port))
    serve.send_signal(signal.SIGINT)
    serve.wait(timeout=60)
    final = sample(s, "tokprof_token_step_duration_seconds_count", pid)
    check(final == file_token_steps(path), f"at the end serve counts {final} token steps, the capture "
          f"{file_token_steps(path)}")
    cls = {lab["class"]: v for fam, typ, sname, lab, v in s
           if sname == "tokprof_gpu_class_seconds_total" and lab.get("pid") == str(pid)}
    busy = sample(s, "tokprof_gpu_busy_seconds_total", pid)
    rc, out, err = run([tk(), "steps", "--json", path])
    steps = json.loads(out)
    steps = steps.get("steps", steps) if isinstance(steps, dict) else steps
    want = sum((x.get("busy_ns") or 0) for x in steps) / 1e9
    kern = sum(v for k, v in cls.items() if k != "copy")
    log(f"GPU seconds: serve classes (kernels) {kern:.6f}, serve busy {busy:.6f}, tokprof steps busy {want:.6f}")
    check(want > 0 and abs(kern - want) <= 0.01 * want,
          f"serve's class counters add up to {kern}, tokprof steps' busy time is {want}")
    check(busy is not None and abs(busy - want) <= 0.01 * want, f"serve's busy {busy}, steps' {want}")
    check(max(cls, key=cls.get) == SLOW_CLASS, f"serve's top class is not {SLOW_CLASS}: {cls}")
    # serve --spec: the same violations as check --follow's
    sv = sample(s, "tokprof_spec_violations_total", pid, assertion="step_deadline", severity="error")
    ok = sample(s, "tokprof_spec_ok", pid, assertion="step_deadline")
    log(f"serve --spec: {sv} violations of step_deadline, check --follow printed {len(viol)}")
    check(sv == len(viol) and sv > 0 and ok == 0, f"serve --spec counts {sv} violations (ok {ok}), "
          f"check --follow printed {len(viol)}")


# ---- rotate and fork ---------------------------------------------------------------------------

def count_follow(spec, d, proc):
    """check --follow over d while proc runs: {assertion: violations printed}, distinct ones, the
    exit status, stderr, and the share of violations printed while proc still ran."""
    f = subprocess.Popen([tk(), "check", "--follow", "--json", spec, d], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    lines = Lines(f, watch=proc)
    err = f.stderr.read()
    f.wait(timeout=300)
    lines.t.join(timeout=60)
    proc.wait(timeout=300)
    seen = {}
    keys = set()
    got = lines.snapshot()
    live = sum(1 for x in got if x[1]) / len(got) if got else 0
    for _, _, line in got:
        o = json.loads(line)
        seen[o["assertion"]] = seen.get(o["assertion"], 0) + 1
        keys.add((o["assertion"], o["pid"], o["tid"], o["step"], o["host_start_ns"]))
    return seen, len(keys), f.returncode, err, live


def case_rotate():
    # a rotating capture: files of ~20 kB
    d = fresh("rotate")
    spec = os.path.join(A.tmp, "rotate.tks")
    with open(spec, "w") as f:
        f.write("assert step_deadline [step]: s.dur <= 12ms;\n"
                "assert no_norm [record]: not (r.kind == kernel and r.name =~ /rms_norm/ and r.token >= 100 and r.token < 103);\n")
    mini = subprocess.Popen([os.path.join(A.build, "kernels", "minillm"), "--steps", "150"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env=sim_env(d, TOKPROF_FLUSH_MS=20, TOKPROF_MAX_MB=0.02, TOKPROF_KEEP=0,
                                        SIMGPU_SLOW=f"{SLOW_KERNEL}:200:2000"))
    wait_for(lambda: any(f.endswith(".tokprof") for f in os.listdir(d)), 60, "the first capture file")
    seen, distinct, rc, err, live = count_follow(spec, d, mini)
    files = sorted(f for f in os.listdir(d) if f.endswith(".tokprof"))
    log(f"rotate: {len(files)} files; follow saw {seen} ({distinct} distinct), exit {rc}, "
        f"{live * 100:.0f} % of them while minillm ran")
    # the follower moves on to each next file as it appears, not once the writer has ended
    check(live >= 0.5, f"only {live * 100:.0f} % of the violations came while minillm ran")
    check(len(files) >= 3, f"the capture rotated only into {files}")
    want = offline_violations(spec, d)
    check(rc == 1, f"check --follow on the rotating capture: exit {rc}\n{err}")
    check(seen == {k: v for k, v in want.items() if v}, f"check --follow saw {seen}, the offline check {want}")
    check(distinct == sum(seen.values()), "a violation was reported twice")


def case_fork():
    # a forking program: parent and child each write their own capture
    d = fresh("fork")
    spec = os.path.join(A.tmp, "fork.tks")
    with open(spec, "w") as f:
        f.write("assert no_child [record]: not (r.kind == kernel and r.name =~ /child_kernel/);\n"
                "assert no_parent [record]: not (r.kind == kernel and r.name =~ /parent_kernel/);\n")
    prog = subprocess.Popen([os.path.join(A.build, "tests", "e2e", "shim", "shim_forker")], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env=sim_env(d, TOKPROF_FLUSH_MS=20))
    wait_for(lambda: any(f.endswith(".tokprof") for f in os.listdir(d)), 60, "the parent's capture")
    seen, distinct, rc, err, live = count_follow(spec, d, prog)
    files = sorted(f for f in os.listdir(d) if f.endswith(".tokprof"))
    want = offline_violations(spec, d)
    log(f"fork: files {files}; follow saw {seen} ({distinct} distinct), offline {want}")
    check(len(files) == 2, f"expected the parent's and the child's capture: {files}")
    check(seen == {k: v for k, v in want.items() if v} and seen.get("no_child") and seen.get("no_parent"),
          f"check --follow saw {seen}, the offline check {want}")
    check(distinct == sum(seen.values()), "a violation was reported twice")


# ---- days: 1,000 rotations under check --follow and top ----------------------------------------

def case_days():
    d = fresh("days")
    spec = os.path.join(A.tmp, "days.tks")
    with open(spec, "w") as f:
        f.write("assert launches [step]: s.launches <= 100000;\n")
    # every chunk its own file: TOKPROF_MAX_MB below one chunk, a chunk every millisecond
    env = sim_env(d, TOKPROF_FLUSH_MS=1, TOKPROF_MAX_MB=0.001, TOKPROF_KEEP=0, SIMGPU_ZERO=1)
    f = subprocess.Popen([tk(), "check", "--follow", spec, d], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    top = subprocess.Popen([tk(), "top", "--interval", "200", d], stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, text=True)
    # as many steps as it takes: minillm is stopped once 1,100 files are written (a fast machine
    # writes fewer files per step, so a fixed step count is timing luck)
    mini = subprocess.Popen([os.path.join(A.build, "kernels", "minillm"), "--steps", "1000000"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)

    def nfiles():
        return sum(1 for x in os.listdir(d) if x.endswith(".tokprof"))
    samples = []  # (files on disk, check --follow's peak RSS, top's), kB
    deadline = time.monotonic() + 900
    while f.poll() is None and time.monotonic() < deadline:
        samples.append((nfiles(), hwm_kb(f.pid), hwm_kb(top.pid)))
        if samples[-1][0] >= 1100 and mini.poll() is None:
            mini.terminate()  # the writer dies mid-run: its last chunk may be torn, as in production
        time.sleep(0.05)
    mini.wait(timeout=600)
    # top has read everything once its peak stops moving with the files: sample it at the end
    last_f = next((x[1] for x in reversed(samples) if x[1]), None)  # its last peak before it exited
    samples.append((nfiles(), last_f, hwm_kb(top.pid)))
    top.send_signal(signal.SIGINT)
    top.wait(timeout=60)
    if f.poll() is None:
        f.kill()
        fail("check --follow did not end within 900 s")
    n = nfiles()
    start = next((x for x in samples if x[0] >= 50 and x[1] and x[2]), None)
    end = next((x for x in reversed(samples) if x[1] and x[2]), None)
    log(f"days: {n} files ({n - 1} rotations); peak RSS (VmHWM) kB: at {start and start[0]} files "
        f"check --follow {start and start[1]}, top {start and start[2]}; at {end and end[0]} files "
        f"check --follow {end and end[1]}, top {end and end[2]}")
    for k in (100, 250, 500, 750, 1000):
        x = next((x for x in samples if x[0] >= k and x[1] and x[2]), None)
        if x:
            log(f"  at {x[0]} files: check --follow {x[1]} kB, top {x[2]} kB")
    check(n >= 1001, f"only {n} files: fewer than 1,000 rotations")
    check(f.returncode == 0, f"check --follow over {n} files: exit {f.returncode}\n{f.stderr.read()[-2000:]}")
    if check(start and end, "no RSS samples after 50 files"):
        check(end[1] <= start[1] + 4096, f"check --follow's peak RSS grew from {start[1]} to {end[1]} kB")
        check(end[2] <= start[2] + 4096, f"top's peak RSS grew from {start[2]} to {end[2]} kB")


# ---- tmux ----------------------------------------------------------------------------------------

def case_tmux():
    if not shutil.which("tmux"):
        fail("tmux is not installed (scripts/setup.sh installs it)")
        return
    d = fresh("tmux")
    rc, out, err = run([os.path.join(A.build, "kernels", "minillm"), "--steps", "60"], env=sim_env(d))
    check(rc == 0, f"minillm: {err}")
    sock = os.path.join(A.tmp, "tmux.sock")
    tm = ["tmux", "-S", sock]
    subprocess.run(tm + ["kill-server"], stderr=subprocess.DEVNULL)
    env = dict(os.environ, TERM="xterm")
    env.pop("TMUX", None)
    subprocess.run(tm + ["-f", "/dev/null", "new-session", "-d", "-x", "140", "-y", "40",
                         "env PS1='$ ' bash --norc --noprofile"], check=True, env=env)

    def pane():
        return subprocess.run(tm + ["capture-pane", "-p"], stdout=subprocess.PIPE, text=True).stdout

    def keys(*k):
        subprocess.run(tm + ["send-keys"] + list(k), check=True)
    try:
        keys(f"{tk()} top --window 60 {d}; echo TOP-EXIT-$?", "Enter")
        check(wait_for(lambda: "top classes by GPU time" in pane(), 60, "top's first frame (classes view)"),
              "no classes view")
        check(wait_for(lambda: "PROCESS / THREAD" in pane() and "q quit" in pane(), 30, "the key help line"),
              "no key line")
        keys("k")
        check(wait_for(lambda: "top kernels by GPU time" in pane() and "top classes" not in pane(), 30,
                       "the kernels view after 'k'"), "'k' did not switch to kernels")
        keys("c")
        check(wait_for(lambda: "top classes by GPU time" in pane(), 30, "the classes view after 'c'"),
              "'c' did not switch back")
        keys("p")
        check(wait_for(lambda: "[paused]" in pane(), 30, "the paused mark after 'p'"), "'p' did not pause")
        keys("p", "-")
        check(wait_for(lambda: "window 55s" in pane() and "[paused]" not in pane(), 30,
                       "window 55s after '-'"), "'-' did not shrink the window")
        log("top in tmux:\n" + pane())
        keys("q")
        check(wait_for(lambda: "TOP-EXIT-0" in pane(), 30, "top to quit on 'q' with status 0"), "q")
        keys("echo us''able", "Enter")  # the shell echoes what is typed: the terminal is back
        check(wait_for(lambda: re.search(r"^usable$", pane(), re.M), 30, "the shell to run a command after top"),
              "the terminal is not usable after top")
    finally:
        subprocess.run(tm + ["kill-server"], stderr=subprocess.DEVNULL)


def main():
    global A
    ap = argparse.ArgumentParser()
    ap.add_argument("case", choices=["errors", "run", "rotate", "fork", "days", "tmux"])
    ap.add_argument("--build", required=True)
    ap.add_argument("--tmp", required=True)
    ap.add_argument("--venv")
    A = ap.parse_args()
    os.makedirs(A.tmp, exist_ok=True)
    globals()["case_" + A.case]()
    if FAILS:
        print(f"{len(FAILS)} failure(s)")
        return 1
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
