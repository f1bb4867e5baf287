#!/usr/bin/env python3
"""CLI tests of the tokprof binary: golden outputs, exit codes, one-line errors, `tokprof run`.

usage: cli_test.py TEST --tokprof BIN --mkcapture BIN --noop LIB --data DIR --tmp DIR
Each TEST is one ctest entry (tests/unit/CMakeLists.txt). Expected files: tests/data/README.md.
UPDATE_GOLDEN=1 rewrites the expected files instead of comparing (review the diff!)."""
import argparse, json, os, shutil, subprocess, sys

A = None


def tokprof(*args, env=None, exe=None, cwd=None):
    # an ASan build of tokprof refuses to start behind a preload; the check is not the point
    env = dict(env or os.environ, ASAN_OPTIONS="verify_asan_link_order=0:" +
               os.environ.get("ASAN_OPTIONS", ""))
    return subprocess.run([exe or A.tokprof, *args], capture_output=True, text=True, env=env,
                          timeout=60, cwd=cwd)


def capture(kind):
    os.makedirs(A.tmp, exist_ok=True)
    path = os.path.join(A.tmp, kind + ".tokprof")
    subprocess.run([A.mkcapture, kind, path], check=True)
    return path


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


def compare(got, name):
    path = os.path.join(A.data, name)
    if os.environ.get("UPDATE_GOLDEN"):
        with open(path, "w") as f:
            f.write(got)
        return
    with open(path) as f:
        want = f.read()
    if got != want:
        import difflib
        sys.stdout.writelines(difflib.unified_diff(want.splitlines(True), got.splitlines(True),
                                                   name, "got"))
        fail(f"output differs from tests/data/{name}")


def one_line_error(p, code, words):
    check(p.returncode == code, f"exit {p.returncode}, expected {code}; stderr: {p.stderr!r}")
    lines = p.stderr.splitlines()
    check(len(lines) == 1, f"expected one line on stderr, got {lines!r}")
    check(lines[0].startswith("tokprof"), lines[0])
    for w in words:
        check(w in lines[0], f"{w!r} not in {lines[0]!r}")


def t_golden_dump():
    p = tokprof("dump", capture("golden"))
    check(p.returncode == 0 and p.stderr == "", f"exit {p.returncode}, stderr {p.stderr!r}")
    for line in p.stdout.splitlines():
        json.loads(line)  # every line is JSON on its own
    compare(p.stdout, "golden.dump.jsonl")
    p = tokprof("dump", "--raw", capture("golden"))
    check(p.returncode == 0, p.stderr)
    compare(p.stdout, "golden.dump-raw.jsonl")
    p = tokprof("dump", "--type", "step,loss", capture("golden"))
    types = {json.loads(l)["type"] for l in p.stdout.splitlines()}
    check(types == {"step", "loss"}, f"--type filter: {types}")


def t_golden_summary():
    p = tokprof("summary", "--json", capture("golden"))
    check(p.returncode == 0 and p.stderr == "", f"exit {p.returncode}, stderr {p.stderr!r}")
    s = json.loads(p.stdout)
    want = {"program": "minillm", "pid": 4242, "steps": 2, "outside_steps": 1, "launches": 4,
            "graph_launches": 1, "copies": 2, "syncs": 3, "dropped": 7, "threads": 2,
            "duration_ns": 2006150 - 1000100, "chunks": 3, "complete": True}
    for k, v in want.items():
        check(s.get(k) == v, f"summary {k}: {s.get(k)!r}, expected {v!r}")
    compare(p.stdout, "golden.summary.json")
    p = tokprof("summary", capture("golden"))
    check(p.returncode == 0, p.stderr)
    compare(p.stdout.replace(capture("golden"), "GOLDEN"), "golden.summary.txt")


def t_torn_tail():
    path = capture("torn")
    for args in (["dump"], ["summary", "--json"]):
        p = tokprof(*args, path)
        check(p.returncode == 0, f"{args}: a torn tail is not an error, exit {p.returncode}")
        lines = p.stderr.splitlines()
        check(len(lines) == 1, f"{args}: one warning line, got {lines!r}")
        check(lines[0].startswith(f"tokprof: warning: {path}: torn tail at byte ")
              and lines[0].endswith(" (incomplete chunk): decoded up to there"), lines[0])
    s = json.loads(p.stdout)
    check(s["chunks"] == 2 and s["complete"] is False and s["stopped_why"] == "incomplete chunk",
          f"torn summary: {s}")
    check(str(s["stopped_at"]) in lines[0], "the offset in the warning is the JSON's")


def t_missing_file():
    for args in (["dump"], ["summary"], ["summary", "--json"]):
        p = tokprof(*args, os.path.join(A.tmp, "does-not-exist.tokprof"))
        one_line_error(p, 2, ["does-not-exist.tokprof", "No such file"])


def t_bad_header():
    p = tokprof("dump", capture("badheader"))
    one_line_error(p, 2, ["not a tokprof capture"])
    check(p.stdout == "", "nothing on stdout")


def t_usage():
    one_line_error(tokprof("frobnicate"), 2, ["unknown command 'frobnicate'"])
    one_line_error(tokprof("dump"), 2, ["no capture file", "tokprof help dump"])
    one_line_error(tokprof("summary", "--bogus", "x"), 2, ["unknown option '--bogus'"])
    one_line_error(tokprof("dump", "--type", "nope", "x"), 2, ["unknown record type 'nope'"])
    p = tokprof("help")
    check(p.returncode == 0 and all(c in p.stdout for c in ("dump", "summary", "run")), p.stdout)
    for c in ("dump", "summary", "run"):
        for args in (["help", c], [c, "--help"]):
            p = tokprof(*args)
            check(p.returncode == 0 and p.stdout.startswith(f"usage: tokprof {c}")
                  and "example" in p.stdout, f"{args}: {p.stdout!r}")
    p = tokprof("--version")
    check(p.returncode == 0 and p.stdout.startswith("tokprof "), p.stdout)


def t_run_env():
    out = os.path.join(A.tmp, "runout")
    shutil.rmtree(out, ignore_errors=True)
    env = dict(os.environ, LD_PRELOAD=A.noop)
    p = tokprof("run", "-o", out, "--step", "sync", "--shim", A.noop, "--", "sh", "-c",
                'printf "%s\\n" "$LD_PRELOAD" "$TOKPROF_OUT" "$TOKPROF_STEP"; exit 3', env=env)
    check(p.returncode == 3, f"the command's exit status passes through: {p.returncode} "
          f"{p.stderr!r}")
    noop = os.path.realpath(A.noop)
    check(p.stdout.splitlines() == [f"{noop}:{A.noop}", os.path.realpath(out), "sync"],
          f"environment: {p.stdout.splitlines()!r}")
    check(os.path.isdir(out), "-o DIR is created")


def t_run_finds_shim():
    # a tokprof in BIN/ finds ../shim/libtokprof.so (build tree) or ../lib/ (installed)
    root = os.path.join(A.tmp, "tree")
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(os.path.join(root, "bin"))
    exe = os.path.join(root, "bin", "tokprof")
    shutil.copy(A.tokprof, exe)
    env = {k: v for k, v in os.environ.items() if k not in ("TOKPROF_SHIM", "LD_PRELOAD")}
    p = tokprof("run", "--", "true", exe=exe, env=env)
    one_line_error(p, 2, ["cannot find libtokprof.so", "--shim"])
    os.makedirs(os.path.join(root, "lib"))
    shutil.copy(A.noop, os.path.join(root, "lib", "libtokprof.so"))
    p = tokprof("run", "-o", root, "--", "sh", "-c", 'echo "$LD_PRELOAD"', exe=exe, env=env)
    check(p.returncode == 0 and p.stdout.strip() == os.path.join(os.path.realpath(root), "lib",
                                                                 "libtokprof.so"),
          f"{p.returncode} {p.stdout!r} {p.stderr!r}")


def t_run_errors():
    one_line_error(tokprof("run"), 2, ["no command to run"])
    one_line_error(tokprof("run", "--shim", A.noop, "-o", A.tmp), 2, ["no command to run"])
    p = tokprof("run", "--shim", A.noop, "-o", A.tmp, "--", "/nonexistent/command", "x")
    one_line_error(p, 2, ["cannot run '/nonexistent/command'", "No such file"])
    p = tokprof("run", "--shim", "/nonexistent/lib.so", "--", "true")
    one_line_error(p, 2, ["cannot use shim '/nonexistent/lib.so'"])


def t_gpu_late():
    """GPU records that come long after their step (a CUPTI that hands its buffers over only at
    exit) count in their launch's step exactly as records that come on time: the same steps,
    busy time, idle split and latency, and nothing reported late."""
    views = (("steps", "--json"), ("summary", "--json"), ("kernels", "--json"))
    out = {}
    for kind in ("gpu_ontime", "gpu_late"):
        d = os.path.join(A.tmp, kind)
        os.makedirs(d, exist_ok=True)
        path = os.path.join(d, "cap.tokprof")
        subprocess.run([A.mkcapture, kind, path], check=True)
        for v in views:
            p = tokprof(*v, path)
            check(p.returncode == 0, f"{kind}: {' '.join(v)} exit {p.returncode}: {p.stderr!r}")
            check("arrived" not in p.stderr, f"{kind}: {' '.join(v)} warns: {p.stderr!r}")
            out[kind, v] = p.stdout.replace(d, "DIR")
    steps = json.loads(out["gpu_ontime", views[0]])
    rows = steps["steps"] if isinstance(steps, dict) else steps
    tokens = [s for s in rows if s.get("kind", "token") == "token"]
    check(len(tokens) == 60, f"{len(tokens)} token steps, expected 60")
    check(all(s.get("gpu_kernels") == 5 for s in tokens), "every step has its 5 GPU kernels")
    for v in views:
        if out["gpu_ontime", v] != out["gpu_late", v]:
            import difflib
            sys.stdout.writelines(difflib.unified_diff(
                out["gpu_ontime", v].splitlines(True), out["gpu_late", v].splitlines(True),
                "on time", "late"))
            fail(f"{' '.join(v)}: late GPU records change the figures")


def t_moe_grouped():
    """Grouped expert kernels beside cuBLAS calls that are not experts (router, shared expert):
    tokprof moe reports no expert, says the load is not observable, and gives the grouped
    kernels' GPU time per step exactly (latecap.c: 2 per step, 1000 + 100 * step ns each) and its
    trend; heatmap --kind expert refuses in one line."""
    path = capture("moe_grouped")
    p = tokprof("moe", "--json", path)
    check(p.returncode == 0, f"moe exit {p.returncode}: {p.stderr!r}")
    d = json.loads(p.stdout)
    check(d["threads"] == [], f"experts reported on grouped kernels: {d['threads']}")
    fu = d["fused"]
    check(fu["per_expert_observable"] is False, "per_expert_observable")
    check(len(fu["kernels"]) == 1 and "GroupedGemm" in fu["kernels"][0], f"kernels {fu['kernels']}")
    steps = fu["threads"][0]["steps"]
    check([s["step"] for s in steps] == list(range(40)), "40 steps")
    for s in steps:
        want = [2, 2, 2 * (1000 + 100 * s["step"])]
        check([s["launches"], s["kernels"], s["gpu_ns"]] == want, f"step {s}: want {want}")
    tr = fu["threads"][0]["trend"]
    check(tr["first_quarter_mean_ns"] == 2 * (1000 + 100 * 4.5), f"trend {tr}")
    check(tr["last_quarter_mean_ns"] == 2 * (1000 + 100 * 34.5), f"trend {tr}")
    p = tokprof("moe", path)
    check("not observable from the host" in p.stdout and "GroupedGemmKernel" in p.stdout.split("\n")[0],
          f"text view: {p.stdout[:300]!r}")
    p = tokprof("heatmap", "-o", os.path.join(A.tmp, "e.svg"), "--kind", "expert", path)
    one_line_error(p, 2, ["fused kernels", "not observable"])


# issue 18: every command parses its options with the one parser (decoder/cmd/cmd.c,
# tkp_cmd_parse). For each command: an option that takes a value, one that takes a number and a
# flag (None: it has none).
OPTIONS = {
    "summary": ("--classes", None, "--json"), "dump": ("--type", None, "--raw"),
    "run": ("--shim", None, None), "doctor": ("--shim", None, "--json"), "gemm": (None, None, "--steps"),
    "moe": ("--svg", "--experts", "--json"), "check": ("--baseline", None, "--explain"),
    "steps": ("--to", "--from", "--csv"), "kernels": ("--name", "--top", "--json"),
    "analyze": ("--classes", None, "--json"), "diff": ("--threshold", None, "--all"),
    "export": ("--format", None, None), "heatmap": ("--kind", None, None),
    "report": ("--spec", None, None), "stacks": ("--root", "--depth", "--folded"),
    "table": ("--database", "--level", "--columns"), "ingest": ("--url", None, "--exit-when-idle"),
    "top": ("--classes", "--window", "--once"), "serve": ("--prometheus", "--keep-ended", None),
    "whatif": ("--classes", "--launch-ns", "--json"),
    "import": ("--step", None, "--json"),
}


def t_options():
    """Every command, alike: an unknown option, a missing value, a flag given a value and a
    number that is not one are each one line naming the option, exit 2; --opt=V is --opt V;
    --help and -h anywhere among the options print the usage, exit 0; `--` ends the options."""
    errs = []

    def want(cond, msg):
        if not cond:
            errs.append(msg)

    def usage_error(cmd, args, words):
        p = tokprof(cmd, *args)
        lines = p.stderr.splitlines()
        want(p.returncode == 2 and len(lines) == 1 and p.stdout == ""
             and lines[0].startswith(f"tokprof {cmd}: ")
             and lines[0].endswith(f"(try 'tokprof help {cmd}')")
             and all(w in lines[0] for w in words),
             f"{cmd} {' '.join(args)}: exit {p.returncode}, want 2 and one line with {words}: "
             f"{p.stderr!r}")

    listed = [l.split()[0] for l in tokprof("help").stdout.split("commands:\n")[1].splitlines()]
    cmds = [c for c in listed if c not in ("help", "version")]
    want(sorted(cmds) == sorted(OPTIONS), f"commands {cmds}: update OPTIONS")
    gone = os.path.join(A.tmp, "gone.tokprof")
    for cmd in cmds:
        valued, number, flag = OPTIONS.get(cmd, (None, None, None))
        usage_error(cmd, ["--no-such-option", gone], ["unknown option '--no-such-option'"])
        usage_error(cmd, ["--no-such-option=3", gone], ["unknown option '--no-such-option=3'"])
        if flag:
            usage_error(cmd, [gone, flag + "=1"], [f"{flag} takes no value"])
        if valued:
            args = [valued] if cmd == "run" else [gone, valued]  # run's options end at gone
            usage_error(cmd, args, [f"{valued} needs a value"])
            # the same answer, whichever way the value is given (not "unknown option")
            a = tokprof(cmd, valued, "v1", "--", gone)
            b = tokprof(cmd, valued + "=v1", "--", gone)
            want((a.returncode, a.stdout, a.stderr) == (b.returncode, b.stdout, b.stderr)
                 and "unknown option" not in a.stderr,
                 f"{cmd}: {valued} v1 gives {a.stderr!r}, {valued}=v1 gives {b.stderr!r}")
        if number:
            for v in ("12x", "-3", ""):
                usage_error(cmd, [number + "=" + v, gone], [f"{number}: '{v}' is not a number"])
        for h in ("--help", "-h"):
            args = ["-o", A.tmp, h, "true"] if cmd == "run" else [gone, h]
            p = tokprof(cmd, *args)
            want(p.returncode == 0 and p.stdout.startswith(f"usage: tokprof {cmd}")
                 and p.stderr == "", f"{cmd} {' '.join(args)}: exit {p.returncode} "
                 f"{p.stdout[:60]!r} {p.stderr!r}")
            p = tokprof(cmd, "--once", "--", h) if cmd == "top" else tokprof(cmd, "--", h)
            # after --, --help is an argument
            want(not p.stdout.startswith("usage:"), f"{cmd} -- {h}: printed the usage")
    # `--` ends the options: what follows is an argument even when it starts with '-'
    dash = os.path.join(A.tmp, "-dash.tokprof")
    shutil.copy(capture("golden"), dash)
    for cmd in ("summary", "dump", "gemm", "moe", "steps", "kernels", "analyze", "stacks"):
        p = tokprof(cmd, "--", "-dash.tokprof", cwd=A.tmp)
        want("unknown option" not in p.stderr and "No such file" not in p.stderr,
             f"{cmd} -- -dash.tokprof: {p.returncode} {p.stderr!r}")
        p = tokprof(cmd, "--", "-gone.tokprof", cwd=A.tmp)
        want(p.returncode == 2 and "-gone.tokprof" in p.stderr and "No such file" in p.stderr,
             f"{cmd} -- -gone.tokprof: {p.returncode} {p.stderr!r}")
    p = tokprof("run", "--shim", A.noop, "-o", A.tmp, "--", "-not-a-program")
    want(p.returncode == 2 and "cannot run '-not-a-program'" in p.stderr, f"run --: {p.stderr!r}")
    for e in errs:
        print("FAIL:", e)
    check(not errs, f"{len(errs)} failures")


def main():
    global A
    ap = argparse.ArgumentParser()
    ap.add_argument("test")
    for o in ("tokprof", "mkcapture", "noop", "data", "tmp"):
        ap.add_argument("--" + o, required=True)
    A = ap.parse_args()
    A.tmp = os.path.join(A.tmp, A.test)
    os.makedirs(A.tmp, exist_ok=True)
    globals()["t_" + A.test]()
    print("ok", A.test)


if __name__ == "__main__":
    main()
