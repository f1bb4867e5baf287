#!/usr/bin/env python3
"""The shim on a shared production host (issue 20, docs/SECURITY.md). Runs on simgpu.

usage: security_check.py CASE BUILD_DIR WORKDIR SECPROBE EVILCUPTI
  symlink   the planted-link attack: before the program execs, a link to a victim file is planted
            at each name the capture will take (the first file, a rotated file, a flight
            snapshot). The victim is untouched, the links too; the capture is written under a
            fresh name (.alt1) and decodes; the program's output is unchanged and stderr silent
  hardlink  the same with a hard link to the victim: the victim keeps its bytes and its link count
  existing  a regular file of the same name (an older capture of a recycled pid): not truncated
  dirs      output directories the shim must refuse, each with exactly one warning line naming
            it and the reason, no file written, the program's output and exit unchanged: a
            world-writable directory without the sticky bit, a symbolic link to a good directory
            (with and without a trailing slash), a directory owned by another user. A 0700
            directory and a root-owned 1777 one (as /tmp) are accepted
  secure    a secure-execution process (AT_SECURE): a copy of SECPROBE with file capabilities,
            run as the unprivileged user nobody, the shim loaded through /etc/ld.so.preload inside
            a private mount namespace (LD_PRELOAD is ignored in such processes). With
            TOKPROF_OUT, TOKPROF_LOG=debug, a bad TOKPROF_MODE and TOKPROF_CUPTI_PATH=EVILCUPTI
            set, it writes nothing, prints nothing, and never loads EVILCUPTI; the same copy
            without the capabilities (control) captures, warns about TOKPROF_MODE and loads it.
            Needs root, unshare, overlayfs and setcap: otherwise skipped (exit 77)
  budget    the default disk bounds: a capture with nothing set records them in META (256 MB
            files, 4 kept, floor 1024 MB or 5 %); with only TOKPROF_MAX_MB=0.08 a long run
            rotates and keeps the default 4 newest files, each under the cap plus one chunk
  floor     a filesystem near full: an 8 MB tmpfs mounted for the test, TOKPROF_MIN_FREE_MB=7,
            a run that would write ~2 MB: one warning, the program runs to its end (exit 0),
            at least 7 MB still free after the run, the capture decodes whole and
            ends with the LOSS record that says it stopped; in flight mode a trigger under the
            floor writes no snapshot, with one warning; a run whose one chunk is bigger than the
            24 KiB left above the floor writes only META and the LOSS counting its records.
            Needs root to mount: else skipped
"""
import glob, json, os, shutil, stat, subprocess, sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from preload import foreign_host, shim_preload  # noqa: E402  (tests/preload.py)

case, build, work, probe, evil = sys.argv[1:6]
SIM = os.path.join(build, "tests/simgpu")
SHIM = os.path.join(build, "shim/libtokprof.so")
TKP = os.path.join(build, "decoder/tokprof")
MINILLM = os.path.join(build, "kernels/minillm")
PROG = os.path.join(build, "tests/e2e/prod/prod_prog")
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
os.chmod(work, 0o755)
SKIP = 77


def env(**kw):
    e = {k: v for k, v in os.environ.items() if not k.startswith("TOKPROF_")}
    e.update(LD_LIBRARY_PATH=SIM, LD_PRELOAD=shim_preload(SHIM), TOKPROF_GPU="off")
    if "TOKPROF_TEST_PRELOAD_PREFIX" in os.environ:
        e["TOKPROF_TEST_PRELOAD_PREFIX"] = os.environ["TOKPROF_TEST_PRELOAD_PREFIX"]
    e.update({k: str(v) for k, v in kw.items()})
    return e


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def skip(msg):
    print("SKIP:", msg)
    sys.exit(SKIP)


def dump(path, *extra):
    p = subprocess.run([TKP, "dump", *extra, path], capture_output=True, text=True)
    return p.returncode, [json.loads(l) for l in p.stdout.splitlines()], p.stderr


def losses(recs):
    """Records the capture says were dropped: the last LOSS of each thread, summed (a loaded
    machine may drop from a thread's ring besides what the floor leaves out)."""
    last = {}
    for r in recs:
        if r["type"] == "loss":
            last[r["tid"]] = r["dropped"]
    return sum(last.values())


def decodes(path):
    rc, recs, err = dump(path)
    if rc or err or not recs or recs[0]["type"] != "meta":
        fail(f"{path}: exit {rc}, {err!r}, first record {recs[:1]}")
    return recs


def minillm_out(s):
    return [l for l in s.splitlines() if "wall =" not in l and "host" not in l]


def baseline(args):
    return subprocess.run(args, env=dict(os.environ, LD_LIBRARY_PATH=SIM), capture_output=True,
                          text=True, timeout=120)


def planted_run(plant, args, names, **kw):
    """Runs `args` under the shim from a shell that first calls plant(dir, name) for each name
    of `names` (formatted with the program's pid, which `exec` keeps); returns the process."""
    caps = os.path.join(work, "caps")
    os.makedirs(caps, mode=0o700)
    script = ("import os, sys, json\n"
              f"sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r})\n"
              "pid = os.getpid()\n"
              f"for n in {names!r}:\n"
              f"    plant({caps!r}, n.format(pid=pid))\n"
              f"os.execv({args[0]!r}, {args!r})\n")
    src = plant_src[plant]
    e = env(TOKPROF_OUT=caps, **kw)
    e.pop("LD_PRELOAD")  # python itself runs without the shim; the program it execs gets it
    e["TKP_PRELOAD"] = shim_preload(SHIM)
    boot = "import os\nos.environ['LD_PRELOAD'] = os.environ.pop('TKP_PRELOAD')\n"
    p = subprocess.run([sys.executable, "-c", boot + src + script], env=e, capture_output=True,
                       text=True, timeout=120)
    return p, caps


VICTIM_BYTES = b"precious, not a capture\n"
plant_src = {
    "symlink": f"def plant(d, n):\n    os.symlink({os.path.join(work, 'victim')!r}, "
               "os.path.join(d, n))\n",
    "hardlink": f"def plant(d, n):\n    os.link({os.path.join(work, 'victim')!r}, "
                "os.path.join(d, n))\n",
    "existing": "def plant(d, n):\n    open(os.path.join(d, n), 'wb').write(b'older capture')\n",
}


if case in ("symlink", "hardlink", "existing"):
    victim = os.path.join(work, "victim")
    with open(victim, "wb") as f:
        f.write(VICTIM_BYTES)
    # stream: the first file and the first rotated one (TOKPROF_MAX_MB small enough to rotate)
    args = [MINILLM, "--steps", "3000", "--style", "hf"]
    base = baseline(args)
    p, caps = planted_run(case, args, ["minillm.{pid}.tokprof", "minillm.{pid}.1.tokprof"],
                          TOKPROF_MAX_MB=0.05, TOKPROF_KEEP=0, TOKPROF_FLUSH_MS=20)
    if p.returncode != base.returncode or minillm_out(p.stdout) != minillm_out(base.stdout):
        fail(f"exit {p.returncode} (want {base.returncode}) or output changed: {p.stderr}")
    if p.stderr:
        fail(f"stderr {p.stderr!r}: a taken name is no reason to warn")
    with open(victim, "rb") as f:
        if f.read() != VICTIM_BYTES:
            fail("the victim file was written")
    names = sorted(os.listdir(caps))
    fresh = [n for n in names if ".alt1." in n]
    pid = fresh[0].split(".")[1] if fresh else "?"
    planted = [f"minillm.{pid}.tokprof", f"minillm.{pid}.1.tokprof"]
    if sorted(fresh) != sorted(n.replace(".tokprof", ".alt1.tokprof") for n in planted) or \
            not set(planted) <= set(names):
        fail(f"want the 2 planted names and a .alt1 file for each, got {names}")
    for n in planted:
        path = os.path.join(caps, n)
        st = os.lstat(path)
        if case == "symlink" and (not stat.S_ISLNK(st.st_mode) or
                                  os.readlink(path) != victim):
            fail(f"{n}: the planted link was changed")
        if case == "hardlink" and os.stat(victim).st_nlink != 3:
            fail(f"victim link count {os.stat(victim).st_nlink}, want 3 (itself + 2 planted)")
        if case == "existing" and open(path, "rb").read() != b"older capture":
            fail(f"{n}: the older file was truncated or written")
    launches = 0
    for n in fresh:
        recs = decodes(os.path.join(caps, n))
        launches += sum(r["type"] == "launch" for r in recs)
    if not launches:
        fail(f"no launches in {fresh}")
    # flight: the first snapshot's name
    shutil.rmtree(caps)
    p, caps = planted_run(case, [PROG, "trigger", "planted"], ["prod_prog.{pid}.snap0.tokprof"],
                          TOKPROF_MODE="flight", TOKPROF_FLUSH_MS=20, TOKPROF_FLIGHT_AFTER_S=0.2)
    if p.returncode or p.stderr or "found" not in p.stdout:
        fail(f"flight: exit {p.returncode}, {p.stdout!r} {p.stderr!r}")
    with open(victim, "rb") as f:
        if f.read() != VICTIM_BYTES:
            fail("flight: the victim file was written")
    snaps = glob.glob(os.path.join(caps, "*.snap0.alt1.tokprof"))
    if len(snaps) != 1 or decodes(snaps[0])[0].get("snapshot", {}).get("why") != "planted":
        fail(f"flight: want one snapshot under a fresh name, got {os.listdir(caps)}")
    print(f"{case}: victim untouched; captures written as {fresh[:2]} and "
          f"{os.path.basename(snaps[0])} ({launches} launches)")

elif case == "dirs":
    args = [MINILLM, "--steps", "3"]
    base = baseline(args)
    good = os.path.join(work, "good")
    os.mkdir(good, 0o700)

    def run(out, want_reason):
        """One run with TOKPROF_OUT=out: refused with `want_reason`, or accepted (None)."""
        for mode in ("stream", "flight"):
            before = set(os.listdir(good))
            p = subprocess.run(args, env=env(TOKPROF_OUT=out, TOKPROF_MODE=mode),
                               capture_output=True, text=True, timeout=60)
            if p.returncode != base.returncode or minillm_out(p.stdout) != minillm_out(base.stdout):
                fail(f"{out} ({mode}): exit or output changed")
            lines = p.stderr.strip().splitlines()
            if want_reason is None:
                if lines:
                    fail(f"{out} ({mode}): accepted directory, yet {lines}")
                continue
            shown = out.rstrip("/")
            if (len(lines) != 1 or f"output directory {shown} refused: {want_reason}" not in
                    lines[0] or "capture off, the program is unaffected" not in lines[0]):
                fail(f"{out} ({mode}): want one line refusing it ({want_reason}), got {lines}")
            if set(os.listdir(good)) != before:
                fail(f"{out} ({mode}): files written through the link")
        return lines[0] if want_reason else None

    shown = []
    ww = os.path.join(work, "worldwritable")
    os.mkdir(ww)
    os.chmod(ww, 0o777)
    shown.append(run(ww, "writable by others without the sticky bit"))
    if os.listdir(ww):
        fail(f"files in the refused directory: {os.listdir(ww)}")
    link = os.path.join(work, "link")
    os.symlink(good, link)
    shown.append(run(link, "a symbolic link"))
    run(link + "/", "a symbolic link")
    if os.geteuid() == 0:
        other = os.path.join(work, "other")
        os.mkdir(other, 0o700)
        os.chown(other, 65534, 65534)
        shown.append(run(other, "owned by uid 65534, not by this process's uid 0"))
        if os.listdir(other):
            fail(f"files in the other user's directory: {os.listdir(other)}")
    run(good, None)
    sticky = os.path.join(work, "sticky")
    os.mkdir(sticky)
    os.chmod(sticky, 0o1777)
    run(sticky, None)
    if not glob.glob(os.path.join(good, "*.tokprof")) or not glob.glob(
            os.path.join(sticky, "*.tokprof")):
        fail("the accepted directories got no capture")
    print("\n".join(["refused, one line each:"] + shown + ["accepted: 0700, 1777"]))

elif case == "secure":
    if os.geteuid() != 0:
        skip("needs root (a mount namespace, an unprivileged user, file capabilities)")
    for tool in ("unshare", "setpriv", "setcap"):
        if not shutil.which(tool):
            skip(f"{tool} not found (util-linux, libcap2-bin: scripts/setup.sh installs them)")
    # everything nobody must reach: the shim, the probe copies, the output directories
    for path in (SHIM, os.path.dirname(SHIM), evil):
        if os.stat(path).st_mode & 0o005 != 0o005:
            skip(f"{path} is not readable by others: nobody could not load it")
    bindir = os.path.join(work, "bin")
    os.mkdir(bindir, 0o755)
    plain, caps = os.path.join(bindir, "probe"), os.path.join(bindir, "probe_caps")
    shutil.copy(probe, plain)
    shutil.copy(probe, caps)
    os.chmod(plain, 0o755)
    os.chmod(caps, 0o755)
    r = subprocess.run(["setcap", "cap_net_bind_service+ep", caps], capture_output=True, text=True)
    if r.returncode:
        skip(f"setcap failed here: {r.stderr.strip()}")
    upper, wdir = os.path.join(work, "upper"), os.path.join(work, "ovlwork")
    os.mkdir(upper)
    os.mkdir(wdir)
    preload = " ".join(filter(None, [os.environ.get("TOKPROF_TEST_PRELOAD_PREFIX"), SHIM]))

    def run(prog, tag):
        out = os.path.join(work, "out_" + tag)
        os.mkdir(out, 0o700)
        os.chown(out, 65534, 65534)
        mark = os.path.join(work, "evil_" + tag)
        e = env(TOKPROF_OUT=out, TOKPROF_LOG="debug", TOKPROF_MODE="bogus", TOKPROF_GPU="always",
                TOKPROF_CUPTI_PATH=evil, TOKPROF_TEST_EVIL_MARK=mark)
        os.chmod(work, 0o777)  # nobody creates the mark file here
        e.pop("LD_PRELOAD")
        # Sanitizer build: the ASan runtime comes first in ld.so.preload too. LeakSanitizer
        # cannot stop the threads of a secure-execution process (it is not dumpable), and the
        # probe is not ours to check: its leak check is off (preload.foreign_host).
        e = foreign_host(e)
        # Inside a private mount namespace: /etc gets an overlay whose ld.so.preload names the
        # shim, seen by this command alone; the host's /etc is never written.
        sh = ("set -e; mount -t overlay overlay -o lowerdir=/etc,upperdir=\"$1\",workdir=\"$2\" "
              "/etc; printf '%s\\n' \"$3\" > /etc/ld.so.preload; shift 3; "
              "exec setpriv --reuid=65534 --regid=65534 --clear-groups -- \"$@\"")
        p = subprocess.run(["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", sh,
                            "sh", upper, wdir, preload, prog], env=e, capture_output=True,
                           text=True, timeout=60)
        os.chmod(work, 0o755)
        if p.returncode and ("mount" in p.stderr or "unshare" in p.stderr):
            skip(f"cannot make a private /etc/ld.so.preload here: {p.stderr.strip()}")
        return p, out, mark

    p, out, mark = run(plain, "control")
    if p.returncode or p.stdout.strip() != "secure=0 shim=1":
        fail(f"control: exit {p.returncode}, {p.stdout!r} {p.stderr!r}")
    if not glob.glob(os.path.join(out, "probe.*.tokprof")) or not os.path.exists(mark):
        fail(f"control: want a capture and the library loaded, got {os.listdir(out)}, "
             f"mark {os.path.exists(mark)}; {p.stderr!r}")
    if "TOKPROF_MODE=bogus" not in p.stderr:
        fail(f"control: the bad TOKPROF_MODE was not read: {p.stderr!r}")
    p, out, mark = run(caps, "secure")
    if p.returncode or p.stdout.strip() != "secure=1 shim=1":
        fail(f"secure: exit {p.returncode}, {p.stdout!r} {p.stderr!r} (want AT_SECURE and the "
             "shim loaded)")
    if os.listdir(out) or os.path.exists(mark) or p.stderr:
        fail(f"secure: files {os.listdir(out)}, library loaded {os.path.exists(mark)}, "
             f"stderr {p.stderr!r}: want nothing")
    print("control (no capabilities): capture written, TOKPROF_MODE read, TOKPROF_CUPTI_PATH "
          "loaded; AT_SECURE (file capabilities, uid nobody): shim loaded, nothing read, "
          "written, loaded or printed")

elif case == "budget":
    out = os.path.join(work, "defaults")
    os.mkdir(out, 0o700)
    p = subprocess.run([MINILLM, "--steps", "3"], env=env(TOKPROF_OUT=out), capture_output=True,
                       text=True, timeout=60)
    caps = glob.glob(os.path.join(out, "*.tokprof"))
    if p.returncode or p.stderr or len(caps) != 1:
        fail(f"defaults: exit {p.returncode}, {p.stderr!r}, files {caps}")
    cfg = decodes(caps[0])[0]["config"]
    want = {"max_bytes": 256 << 20, "keep": 4, "min_free_bytes": 1024 << 20, "min_free_pct": 5}
    got = {k: cfg.get(k) for k in want}
    if got != want:
        fail(f"default bounds {got}, documented {want} (docs/OPERATIONS.md, README.md)")
    out = os.path.join(work, "rotate")
    os.mkdir(out, 0o700)
    cap = 0.08  # format 5: a graph step is ~25 bytes
    p = subprocess.run([MINILLM, "--steps", "20000", "--graphs"],
                       env=env(TOKPROF_OUT=out, TOKPROF_MAX_MB=cap, TOKPROF_FLUSH_MS=20),
                       capture_output=True, text=True, timeout=120)
    if p.returncode or p.stderr:
        fail(f"rotate: exit {p.returncode}: {p.stderr}")
    caps = glob.glob(os.path.join(out, "*.tokprof"))
    idx = sorted(int(c.split(".")[-2]) if c.count(".") == 3 else 0 for c in caps)
    if len(idx) != 4 or idx[0] < 1 or idx != list(range(idx[0], idx[0] + 4)):
        fail(f"want the newest 4 (the default TOKPROF_KEEP) of more than 4 files, got {idx}")
    total, chunk = 0, 0
    for c in caps:
        rc, recs, err = dump(c, "--raw")
        offs = [r["offset"] for r in recs if r["type"] == "chunk"] + [os.path.getsize(c)]
        chunk = max([chunk] + [b - a for a, b in zip(offs, offs[1:])])
        total += os.path.getsize(c)
        decodes(c)
    if total > 4 * (cap * 1048576 + chunk):
        fail(f"{total} bytes kept, over 4 x ({cap} MB + one chunk of {chunk})")
    print(f"defaults in META: {got}; TOKPROF_MAX_MB={cap} alone: files {idx} of {idx[-1] + 1} "
          f"kept, {total} bytes <= 4 x ({cap} MB + {chunk})")

elif case == "floor":
    if os.geteuid() != 0:
        skip("needs root to mount a small tmpfs")
    mnt = os.path.join(work, "mnt")
    os.mkdir(mnt)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m,mode=0700", "tmpfs", mnt],
                       capture_output=True, text=True)
    if r.returncode:
        skip(f"cannot mount a tmpfs here: {r.stderr.strip()}")
    try:
        floor_mb = 7  # 1 MB to write; the run makes ~2 MB (1.66 MB per 5000 hf steps)
        steps = 6000
        args = [MINILLM, "--steps", str(steps), "--style", "hf"]
        p = subprocess.run(args, env=env(TOKPROF_OUT=mnt, TOKPROF_MIN_FREE_MB=floor_mb,
                                         TOKPROF_FLUSH_MS=20), capture_output=True, text=True,
                           timeout=170)
        sv = os.statvfs(mnt)
        free = sv.f_bavail * sv.f_frsize
        caps = glob.glob(os.path.join(mnt, "*.tokprof"))
        sizes = {os.path.basename(c): os.path.getsize(c) for c in caps}
        lines = p.stderr.strip().splitlines()
        # the program ran to its end (no baseline run: it would double the test's time)
        if p.returncode or f"1 thread(s), {steps + 1} step(s) each" not in p.stdout:
            fail(f"exit {p.returncode}, output {p.stdout!r}")
        if (len(lines) != 1 or "too close to the floor" not in lines[0] or
                "capture stopped, the program is unaffected" not in lines[0]):
            fail(f"want one warning about the floor, got {lines}")
        if free < floor_mb << 20:
            fail(f"{free} bytes free after the run, under the {floor_mb} MB floor")
        if len(caps) != 1:
            fail(f"files {sizes}")
        rc, recs, err = dump(caps[0])
        if rc or err or not any(r["type"] == "launch" for r in recs):
            fail(f"capture: exit {rc}, {err!r}")
        if recs[-1]["type"] != "loss":
            fail(f"the capture ends with {recs[-1]}, not the LOSS that says it stopped")
        try:  # that LOSS is of thread 4294967295: summary once looped on it forever
            q = subprocess.run([TKP, "summary", "--json", caps[0]], capture_output=True, text=True,
                               timeout=60)
        except subprocess.TimeoutExpired:
            fail("tokprof summary of the stopped capture did not end")
        if q.returncode or json.loads(q.stdout).get("dropped") != losses(recs):
            fail(f"summary: exit {q.returncode}, {q.stdout[:200]!r} {q.stderr!r}")
        print(f"{lines[0]}\n{sizes}, {free / 1048576:.1f} MB still free; ends with {recs[-1]}")
        # flight mode under the floor: the trigger is taken, no snapshot is written
        out = os.path.join(mnt, "flight")
        os.mkdir(out, 0o700)
        p = subprocess.run([PROG, "trigger", "low"],
                           env=env(TOKPROF_OUT=out, TOKPROF_MODE="flight", TOKPROF_FLUSH_MS=20,
                                   TOKPROF_FLIGHT_AFTER_S=0.2, TOKPROF_MIN_FREE_MB=1000),
                           capture_output=True, text=True, timeout=120)
        lines = p.stderr.strip().splitlines()
        if p.returncode or "found" not in p.stdout or os.listdir(out) or len(lines) != 1 or \
                "no snapshot is written while it lasts" not in lines[0]:
            fail(f"flight: exit {p.returncode}, {p.stdout!r}, files {os.listdir(out)}, {lines}")
        print(f"flight: {lines[0]}")
        # a last chunk bigger than what is left above the floor: left out, its records counted
        # on the LOSS that ends the file (one chunk for the whole run: the flush period is long)
        out = os.path.join(mnt, "last")
        os.mkdir(out, 0o700)
        sv = os.statvfs(mnt)
        floor = (sv.f_bavail * sv.f_frsize - (24 << 10)) / 1048576.0  # 24 KiB of room
        p = subprocess.run([MINILLM, "--steps", "2000", "--style", "hf"],
                           env=env(TOKPROF_OUT=out, TOKPROF_MIN_FREE_MB=f"{floor:.6f}",
                                   TOKPROF_FLUSH_MS=600000), capture_output=True, text=True,
                           timeout=170)
        sv = os.statvfs(mnt)
        free = sv.f_bavail * sv.f_frsize
        caps = glob.glob(os.path.join(out, "*.tokprof"))
        lines = p.stderr.strip().splitlines()
        if p.returncode or len(lines) != 1 or "too close to the floor" not in lines[0]:
            fail(f"last chunk: exit {p.returncode}, {lines}")
        if free < floor * 1048576:
            fail(f"last chunk: {free} bytes free after the run, under the floor of {floor} MB")
        if len(caps) != 1:
            fail(f"last chunk: files {caps}")
        rc, recs, err = dump(caps[0])
        kinds = [r["type"] for r in recs]
        if rc or err or kinds[0] != "meta" or set(kinds[1:]) != {"loss"} or \
                recs[-1]["dropped"] < 2000:
            fail(f"last chunk: exit {rc}, {err!r}, records {recs}")
        q = subprocess.run([TKP, "summary", "--json", caps[0]], capture_output=True, text=True,
                           timeout=60)
        if q.returncode or json.loads(q.stdout).get("dropped") != losses(recs):
            fail(f"last chunk summary: exit {q.returncode}, {q.stdout[:200]!r} {q.stderr!r}")
        print(f"last chunk left out: {recs[-1]}, {os.path.getsize(caps[0])} bytes written, "
              f"{free / 1048576:.3f} MB free over a floor of {floor:.3f} MB")
    finally:
        subprocess.run(["umount", "-l", mnt])
else:
    fail(f"unknown case {case}")
