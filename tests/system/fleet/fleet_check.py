#!/usr/bin/env python3
"""Fleet: captures become rows in ClickHouse (docs/FLEET.md). Runs on simgpu, against two real
ClickHouse server processes started here (Debian 12's clickhouse-server 18.16, from
scripts/setup.sh) on loopback ports with their own temporary config and data directories.

usage: fleet_check.py CASE BUILD_DIR WORKDIR
  cluster  captures of six simulated hosts (minillm runs; two with SIMGPU_SLOW on the attention
           kernels from token step SPLIT, two MoE, one of them Zipf-skewed), the schema from
           `tokprof table --ddl clickhouse`, `tokprof ingest` through the Distributed tables:
           both shards hold rows; row counts equal `tokprof steps` rows (and `tokprof table`'s
           for the other tables); the p99 inter-token latency per host equals `tokprof summary`'s;
           the regressed hosts are exactly the slowed ones and the class that moved is attention;
           the MoE imbalance ranks the skewed host first; the five queries of docs/FLEET.md
           answer what tests/system/fleet/answers.txt says; the three formats load and read back equal
  restart  `tokprof ingest --watch` over finished captures and a growing one (a paced minillm
           still writing, stopped with SIGSTOP mid-run): killed with SIGKILL while it waits for a
           stopped shard, restarted after the shard is back, killed again once rows of the
           growing capture are stored, minillm let go, restarted until every process ended; a
           kill right after the server stored rows (the state file's `done` lines lost, and a
           torn last line); the HTTP server stopped while ingest runs and started again: final
           row counts exact, no duplicates
  watch    `tokprof ingest --watch` follows a capture while it grows: rows of a paced minillm
           appear in ClickHouse while minillm is stopped mid-run (its file still open, more to
           come), in more than one batch, and once it ended the counts are exact, no duplicates
  rotate   `tokprof ingest --watch` follows a capture the shim rotates while it runs
           (TOKPROF_MAX_MB): killed once rows of it are stored, restarted, minillm let go: each
           file's rows once, under one capture_id, as many as `tokprof table` makes of the files
  containers  two minillm in their own user, PID and UTS namespaces (pid 1 each, host names c1
           and c2) write into one watched directory at once: ingest --watch keeps the two captures
           of one pid apart and sees each end by the shim's file lock, so --exit-when-idle ends;
           each host's rows exact, two capture_ids, no duplicates
  complete a capture given while its writer runs is waited for and ingested whole when it
           ended; a flight snapshot in a watched directory is ingested once written even with
           --settle 3600: both told by the shim's lock on the file
  moewindow  `table moe` of a MoE capture read by windows of its steps (--moe-window: the
           second pass in bounded memory) gives the rows of the whole-capture pass byte for byte,
           with a lower peak RSS (no ClickHouse)
  hostile  a torn capture (rows up to its last whole chunk, a warning), a rotated capture (one
           capture_id, however its files are read), every capture of the
           fuzz corpus (exit 0, 1 or 2, never a crash; errors on one line), labels with tabs,
           newlines, quotes and backslashes round-trip through TSV, JSON and Native; a
           malformed --label, an unreadable capture among good ones, a server error
  chdb     the exported files (zstd, gzip) read by a current ClickHouse engine (chdb from PyPI,
           in the venv scripts/setup.sh makes) with file(): the five queries give the answers
           the 18.16 cluster gives
  windowed a TOKPROF_GPU=window:2/10 capture, by ingest (Native) and by a TSV insert into
           18.16: untimed steps' busy_ns NULL (count, non-NULL count and sum as tokprof steps)
"""
import glob, gzip, json, os, re, shutil, signal, socket, subprocess, sys, time, urllib.parse
import urllib.error
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from preload import shim_preload  # noqa: E402  (tests/preload.py)

HERE = os.path.dirname(os.path.abspath(__file__))
case, build, work = sys.argv[1:4]
SIM = os.path.join(build, "tests/simgpu")
SHIM = os.path.join(build, "shim/libtokprof.so")
TKP = os.path.join(build, "decoder/tokprof")
MINILLM = os.path.join(build, "kernels/minillm")
SERVER = "/usr/sbin/clickhouse-server"
CHDB_PY = os.environ.get("TOKPROF_CHDB_VENV", "/opt/tokprof-chdb-venv") + "/bin/python3"
TABLES = ["steps", "step_classes", "kernels", "calls", "moe"]
SPLIT = 20     # the token step from which the slowed hosts' attention kernels take 3x
STEPS = 40
LAYERS = 4     # minillm's default: 2 paged_attention kernels per layer per step
CLUSTER = "tokprof_fleet"
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def tkp(*args, check=True, inp=None):
    p = subprocess.run([TKP, *args], capture_output=True, input=inp, timeout=300)
    if check and p.returncode:
        fail(f"tokprof {' '.join(args)}: exit {p.returncode}: {p.stderr.decode()}")
    return p


# ---- captures of simulated hosts ----

# host: (minillm arguments, environment)
SLOW = {"SIMGPU_SLOW": f"paged_attention:{2 * LAYERS * SPLIT}:3"}
HOSTS = {
    "gpu-a1": ([], {}),
    "gpu-a2": ([], SLOW),
    "gpu-b1": (["--style", "llamacpp"], {}),
    "gpu-b2": (["--style", "llamacpp"], SLOW),
    "gpu-m1": (["--moe", "8,2", "--batch", "4"], {}),
    "gpu-m2": (["--moe", "8,2", "--zipf", "1.1", "--batch", "4"], {}),
}


def capture(out, args, extra):
    """One minillm capture in out. The answers compared exactly need every record: a large ring
    and a short flush keep the shim from dropping any on a loaded machine (it drops and counts
    when its ring is full); a capture that still dropped some is made again."""
    for attempt in range(3):
        shutil.rmtree(out, ignore_errors=True)
        os.makedirs(out)
        env = dict(os.environ, LD_LIBRARY_PATH=SIM, LD_PRELOAD=shim_preload(SHIM),
                   TOKPROF_OUT=out, TOKPROF_RING_KB="16384", TOKPROF_FLUSH_MS="50")
        for k in ("TOKPROF_MODE", "TOKPROF_TRIGGER", "TOKPROF_MAX_MB", "TOKPROF_KEEP",
                  "SIMGPU_SLOW"):
            env.pop(k, None)
        env.update(extra)
        p = subprocess.run([MINILLM, "--steps", str(STEPS), *args], env=env,
                           capture_output=True, timeout=120)
        if p.returncode:
            fail(f"minillm {args}: exit {p.returncode}: {p.stderr.decode()[-500:]}")
        caps = glob.glob(os.path.join(out, "*.tokprof"))
        if len(caps) != 1:
            fail(f"{out}: want one capture, got {caps}")
        if json.loads(tkp("summary", "--json", caps[0]).stdout)["dropped"] == 0:
            return caps[0]
        print(f"note: {caps[0]}: the shim dropped records (machine overloaded); again")
    fail(f"{out}: the shim dropped records in 3 captures running")


def make_hosts():
    return {h: capture(os.path.join(work, "caps", h), a, e) for h, (a, e) in HOSTS.items()}


# ---- two ClickHouse servers ----

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """One clickhouse-server process with its own config and data under WORKDIR/chN."""

    def __init__(self, n, tcp_ports):
        self.dir = os.path.join(work, f"ch{n}")
        self.http, self.tcp = free_port(), tcp_ports[n]
        self.proc = None
        os.makedirs(self.dir, exist_ok=True)
        shards = "".join(f"<shard><replica><host>127.0.0.1</host><port>{p}</port></replica>"
                         "</shard>" for p in tcp_ports)
        d = self.dir
        with open(os.path.join(d, "config.xml"), "w") as f:
            f.write(f"""<?xml version="1.0"?>
<yandex>
  <logger><level>warning</level><log>{d}/server.log</log><errorlog>{d}/error.log</errorlog>
    <size>10M</size><count>1</count></logger>
  <listen_host>127.0.0.1</listen_host>
  <http_port>{self.http}</http_port>
  <tcp_port>{self.tcp}</tcp_port>
  <path>{d}/data/</path>
  <tmp_path>{d}/tmp/</tmp_path>
  <user_files_path>{d}/user_files/</user_files_path>
  <format_schema_path>{d}/format_schemas/</format_schema_path>
  <users_config>{d}/users.xml</users_config>
  <default_profile>default</default_profile>
  <default_database>default</default_database>
  <timezone>UTC</timezone>
  <mark_cache_size>16777216</mark_cache_size>
  <max_concurrent_queries>20</max_concurrent_queries>
  <remote_servers><{CLUSTER}>{shards}</{CLUSTER}></remote_servers>
</yandex>
""")
        with open(os.path.join(d, "users.xml"), "w") as f:
            f.write("""<?xml version="1.0"?>
<yandex>
  <profiles><default></default></profiles>
  <users><default><password></password><networks><ip>127.0.0.1</ip><ip>::1</ip></networks>
    <profile>default</profile><quota>default</quota></default></users>
  <quotas><default></default></quotas>
</yandex>
""")

    def start(self):
        self.proc = subprocess.Popen([SERVER, f"--config-file={self.dir}/config.xml"],
                                     cwd=self.dir, stdout=open(f"{self.dir}/stdout", "ab"),
                                     stderr=subprocess.STDOUT, start_new_session=True)
        # the server must not outlive the test, even one killed by ctest's timeout (no
        # finally then): a watchdog stops it once this process is gone
        pid = self.proc.pid
        self.watchdog = subprocess.Popen(
            ["sh", "-c", f"while kill -0 {os.getpid()} 2>/dev/null; do sleep 1; done; "
             f"kill {pid} 2>/dev/null; sleep 30; kill -9 {pid} 2>/dev/null"],
            start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 120
        while time.time() < deadline:
            if self.proc.poll() is not None:
                fail(f"clickhouse-server {self.dir} exited {self.proc.returncode}: "
                     + open(f"{self.dir}/stdout").read()[-800:])
            try:
                if self.query("SELECT 1").strip() == "1":
                    return
            except OSError:
                time.sleep(0.3)
        fail(f"clickhouse-server {self.dir} did not answer in 120 s")

    def stop(self):
        if getattr(self, "watchdog", None):
            self.watchdog.kill()
            self.watchdog.wait()
            self.watchdog = None
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def url(self):
        return f"http://127.0.0.1:{self.http}"

    def query(self, sql, data=None):
        # inserts wait until the shard stored the rows (18.16's Distributed default is async)
        # POST: a GET is read-only
        req = urllib.request.Request(self.url() + "/?insert_distributed_sync=1&query=" +
                                     urllib.parse.quote(sql), data=data or b"")
        try:
            with urllib.request.urlopen(req, timeout=120) as r:
                return r.read().decode()
        except urllib.error.HTTPError as e:
            fail(f"ClickHouse {self.dir}: {sql[:300]}\n{e.read().decode()[:1500]}")


def cluster():
    if not os.access(SERVER, os.X_OK):
        fail(f"{SERVER} missing: scripts/setup.sh installs clickhouse-server")
    ports = [free_port(), free_port()]
    servers = [Server(0, ports), Server(1, ports)]
    return servers


def with_cluster(body):
    servers = cluster()
    try:
        for s in servers:
            s.start()
        ddl = tkp("table", "--ddl", "clickhouse", "--cluster", CLUSTER).stdout.decode()
        for s in servers:
            for stmt in ddl.split(";\n"):
                if stmt.strip():
                    s.query(stmt)
        body(servers)
    finally:  # stop the servers whatever happens
        for s in servers:
            s.stop()


def ingest(s, *args, check=True):
    return tkp("ingest", "--url", s.url(), "--settle", "0", *args, check=check)


def table_rows(path, table, *labels):
    paths = path if isinstance(path, list) else [path]
    out = tkp("table", table, "--compress", "none", *labels, *paths).stdout.decode()
    return out.count("\n") - 1


def steps_rows(path):
    return tkp("steps", "--csv", path).stdout.decode().count("\n") - 1


def queries():
    """The five queries of docs/FLEET.md, between its ```sql fences marked -- Qn."""
    text = open(os.path.join(HERE, "..", "..", "..", "docs", "FLEET.md")).read()
    qs = {}
    for block in text.split("```sql")[1:]:
        sql = block.split("```")[0].strip()
        if sql.startswith("-- Q"):
            qs[sql.split()[1]] = sql
    if len(qs) != 5:
        fail(f"docs/FLEET.md: want five queries marked -- Q1..Q5, got {sorted(qs)}")
    return qs


def answers_expected():
    got, cur = {}, None
    for line in open(os.path.join(HERE, "answers.txt")).read().splitlines():
        if line.startswith("## Q"):
            cur = line[3:].strip()
            got[cur] = []
        elif cur and line.strip() and not line.startswith("#"):
            got[cur].append(line)
    return got


def run_queries(run):
    """{Qn: result text} with the database tokprof (18.16) or file() tables (chdb) via run."""
    return {k: run(q) for k, q in queries().items()}


# ---- cases ----

def case_cluster():
    caps = make_hosts()

    def body(servers):
        a, b = servers
        for h, c in caps.items():
            ingest(a, "--state", os.path.join(work, "state"), "--label", f"host={h}",
                   "--label", "model=minillm-4l", c)
        # both shards hold rows
        for s in servers:
            n = int(s.query("SELECT count() FROM tokprof.steps_local"))
            if n == 0:
                fail(f"shard {s.dir} holds no steps rows")
        # row counts: steps = tokprof steps rows; the other tables = tokprof table's
        for h, c in caps.items():
            for t in TABLES:
                want = steps_rows(c) if t == "steps" else table_rows(c, t)
                got = int(a.query(f"SELECT count() FROM tokprof.{t} WHERE host = '{h}'"))
                if got != want:
                    fail(f"{h}: {got} {t} rows in ClickHouse, tokprof says {want}")
        # p99 inter-token latency per host = summary's
        q = ("SELECT host, arrayElement(arraySort(groupArray(itl_ns)), "
             "toUInt64(ceil(0.99 * count()))) FROM tokprof.steps WHERE itl_ns > 0 "
             "GROUP BY host ORDER BY host")
        p99 = dict(l.split("\t") for l in a.query(q).splitlines())
        for h, c in caps.items():
            want = json.loads(tkp("summary", "--json", c).stdout)["itl_ns"]["p99"]
            if int(p99[h]) != want:
                fail(f"{h}: p99 ITL {p99[h]} in ClickHouse, summary says {want}")
        ans = run_queries(a.query)
        with open(os.path.join(work, "answers.out"), "w") as f:
            for k in sorted(ans):
                f.write(f"## {k}\n{ans[k]}\n")
        check_answers(ans)
        # the three formats load and read back equal (Native, JSONEachRow, TSVWithNames)
        c = caps["gpu-m2"]
        for fmt, name in (("native", "Native"), ("json", "JSONEachRow"), ("tsv", "TSVWithNames")):
            for t in TABLES:
                cols = tkp("table", t, "--columns").stdout.decode().strip()
                data = tkp("table", t, "--format", fmt, "--compress", "none", "--label",
                           f"host=fmt-{fmt}", "--label", "note=a\tb\nc'd\\e", c).stdout
                a.query(f"INSERT INTO tokprof.{t} ({cols}) FORMAT {name}", data)
        for t in TABLES:
            rows = {fmt: a.query(
                "SELECT count(), groupArray(label_values)[1], sum(cityHash64(capture_id, tid)) "
                f"FROM tokprof.{t} WHERE host = 'fmt-{fmt}'") for fmt in ("native", "json", "tsv")}
            if len(set(rows.values())) != 1 or rows["tsv"].startswith("0\t"):
                fail(f"{t}: the formats read back differently: {rows}")
        # the row of a format, whole, equals the TSV one's
        cols = tkp("table", "steps", "--columns").stdout.decode().strip().replace("host, ", "")
        got = {fmt: a.query(f"SELECT {cols} FROM tokprof.steps WHERE host = 'fmt-{fmt}' "
                            "ORDER BY thread, seg") for fmt in ("native", "json", "tsv")}
        if got["native"] != got["tsv"] or got["json"] != got["tsv"]:
            fail("steps rows differ between the formats")

    with_cluster(body)
    print("cluster: ok")


def check_answers(ans):
    """The assertions of issue 21 on the query answers."""
    # Q3: the regressed hosts are exactly the slowed ones, the class that moved is attention
    reg = [l.split("\t") for l in ans["Q3"].splitlines()]
    hosts = sorted(r[0] for r in reg)
    if hosts != ["gpu-a2", "gpu-b2"] or any(r[1] != "attention" for r in reg):
        fail(f"Q3 regressed hosts/classes {reg}, want gpu-a2 and gpu-b2, attention")
    # Q5: the skewed MoE host has the worst imbalance
    moe = [l.split("\t") for l in ans["Q5"].splitlines()]
    if not moe or moe[0][0] != "gpu-m2" or len(moe) < 2:
        fail(f"Q5 imbalance ranking {moe}, want gpu-m2 first, then gpu-m1")
    exp = answers_expected()
    for k in ("Q2", "Q3"):  # fully deterministic: the simulated GPU's durations
        if ans[k].splitlines() != exp.get(k):
            fail(f"{k} answered\n{ans[k]}\nanswers.txt says\n" + "\n".join(exp.get(k, [])))


def no_duplicates(s):
    for t, key in (("steps", "capture_id, thread, seg"),
                   ("step_classes", "capture_id, thread, seg, class"),
                   ("moe", "capture_id, thread, seg, layer, expert"),
                   ("kernels", "capture_id, hour_ns, name")):
        d = s.query(f"SELECT count() FROM (SELECT {key}, count() AS c FROM tokprof.{t} "
                    f"GROUP BY {key} HAVING c > 1)")
        if int(d) != 0:
            fail(f"{t}: {d.strip()} keys stored twice")


def wait_for_line(path, text, proc):
    deadline = time.time() + 90
    while time.time() < deadline:
        if text in open(path, errors="replace").read():
            return
        if proc.poll() is not None:
            break
        time.sleep(0.2)
    proc.kill()
    fail(f"ingest never said '{text}':\n{open(path, errors='replace').read()}")


def live_minillm(out, steps, wrap=(), **extra):
    """A minillm writing its capture into out as it runs, paced by simgpu (every step's embed
    kernel starts 20 ms late, and the host waits for it): a capture that grows for seconds.
    wrap: a command that runs it (the process returned is then that command's)."""
    env = dict(os.environ, LD_LIBRARY_PATH=SIM, LD_PRELOAD=shim_preload(SHIM), TOKPROF_OUT=out,
               TOKPROF_RING_KB="16384", TOKPROF_FLUSH_MS="50", SIMGPU_STALL="1:20000000")
    for k in ("TOKPROF_MODE", "TOKPROF_TRIGGER", "TOKPROF_MAX_MB", "TOKPROF_KEEP", "SIMGPU_SLOW"):
        env.pop(k, None)
    env.update(extra)
    if wrap:  # the wrapper is not preloaded (in the sanitizer build the shim needs ASan's
        # runtime, which a plain program lacks): it gets the preload in TKP_PRELOAD to pass on
        env["TKP_PRELOAD"] = env.pop("LD_PRELOAD")
    return subprocess.Popen([*wrap, MINILLM, "--steps", str(steps)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def sigstop(p):
    """SIGSTOP p and return once every thread of it is stopped: the signal is delivered
    asynchronously, and a write(2) the shim's writer thread had begun still lands after
    send_signal returns (the watch case once measured the size before that write, under ASan)."""
    p.send_signal(signal.SIGSTOP)
    deadline = time.time() + 60
    while time.time() < deadline:
        states = []
        for t in glob.glob(f"/proc/{p.pid}/task/*/stat"):
            try:
                states.append(open(t).read().rsplit(")", 1)[1].split()[0])
            except (OSError, IndexError):
                pass
        if states and all(s in "Tt" for s in states):
            return
        if p.poll() is not None:
            fail(f"pid {p.pid} ended (exit {p.returncode}) while being stopped")
        time.sleep(0.02)
    fail(f"pid {p.pid} not stopped 60 s after SIGSTOP")


def stop_after_steps(p, out, n):
    """SIGSTOP minillm p once its capture in out holds n token steps (read as it grows)."""
    path = os.path.join(out, f"minillm.{p.pid}.tokprof")
    deadline = time.time() + 120
    while time.time() < deadline:
        if p.poll() is not None:
            fail(f"minillm ended (exit {p.returncode}) before its capture held {n} steps")
        if os.path.exists(path):
            r = tkp("steps", "--csv", path, check=False).stdout.decode()
            if sum(1 for l in r.splitlines()[1:] if ",token," in l) >= n:
                sigstop(p)
                return path
        time.sleep(0.2)
    p.kill()
    fail(f"{path}: never held {n} token steps")


def same_counts(s, host, path):  # path: a capture, or a list of its rotated files
    """Every table's rows of host in ClickHouse are as many as tokprof table makes of path."""
    for t in TABLES:
        got = int(s.query(f"SELECT count() FROM tokprof.{t} WHERE host = '{host}'"))
        if got != table_rows(path, t):
            fail(f"{host} {t}: {got} rows in ClickHouse, tokprof table says {table_rows(path, t)}")


def let_go(mini):
    """SIGCONT a stopped minillm and wait for it to end well."""
    mini.send_signal(signal.SIGCONT)
    if mini.wait(180) != 0:
        fail(f"minillm: exit {mini.returncode}")


def with_live(minis, body):
    """with_cluster(body), and the minillm processes minis (one, or a list body may add to) left
    neither stopped nor running whatever happens."""
    try:
        with_cluster(body)
    finally:
        for m in minis if isinstance(minis, list) else [minis]:
            if m.poll() is None:
                m.send_signal(signal.SIGCONT)
                m.kill()


def wait_rows(s, where, what, proc=None):
    """Waits until ClickHouse holds steps rows WHERE where; their count."""
    deadline = time.time() + 120
    while time.time() < deadline:
        n = int(s.query(f"SELECT count() FROM tokprof.steps WHERE {where}"))
        if n:
            return n
        if proc is not None and proc.poll() is not None:
            fail(f"ingest ended (exit {proc.returncode}) before {what}")
        time.sleep(0.2)
    fail(f"no steps rows {what}")


def case_restart():
    watch = os.path.join(work, "watch")
    caps = [capture(os.path.join(work, "caps", f"r{i}"), ["--steps", "12"], {}) for i in range(6)]
    os.makedirs(watch)
    for c in caps:  # the shim's output directory of a host: six processes' captures
        shutil.copy(c, watch)
    st = os.path.join(work, "state")
    cmd = [TKP, "ingest", "--settle", "0", "--batch", "0", "--state", st, "--label",
           "host=r-host", "--watch", watch, "--poll", "0.2"]
    mini = live_minillm(watch, 300)  # and a seventh, still writing

    def body(servers):
        a, b = servers

        def totals():
            return {t: int(a.query(f"SELECT count() FROM tokprof.{t} WHERE host = 'r-host'"))
                    for t in TABLES}

        live = stop_after_steps(mini, watch, 80)
        # 1. a shard down: ingest waits for it, saying so; SIGKILL while it waits (its `begin`
        # written, the outcome unknown); the shard back
        b.stop()
        log = os.path.join(work, "ingest1.err")
        p = subprocess.Popen(cmd + ["--url", a.url()], stdout=subprocess.DEVNULL,
                             stderr=open(log, "wb"))
        wait_for_line(log, "waiting for ClickHouse", p)
        p.send_signal(signal.SIGKILL)
        p.wait()
        if "begin" not in open(st).read():
            fail("ingest was killed before it began a send: the test did not bite")
        b.start()
        # 2. again, following: rows of the growing capture while its writer is stopped mid-run;
        # SIGKILL there (at whatever point it is), minillm let go, then ingest until every
        # process ended: exact, no duplicates
        log = os.path.join(work, "ingest2.err")
        p = subprocess.Popen(cmd + ["--url", a.url()], stdout=subprocess.DEVNULL,
                             stderr=open(log, "wb"))
        wait_rows(a, f"pid = {mini.pid}", "of the growing capture", p)
        p.send_signal(signal.SIGKILL)
        p.wait()
        let_go(mini)
        want = {t: sum(table_rows(c, t) for c in caps + [live]) for t in TABLES}
        tkp(*cmd[1:], "--exit-when-idle", "--url", a.url())
        got = totals()
        if got != want:
            fail(f"after SIGKILLs and restarts: {got}, want {want}")
        no_duplicates(a)
        # 2. killed right after the server stored rows: every `done` line lost, and a line
        # torn by the kill at the end
        lines = open(st).read().splitlines()
        with open(st, "w") as f:
            f.write("\n".join(l for l in lines if not l.startswith("done")) + "\ndone 12")
        tkp(*cmd[1:], "--exit-when-idle", "--url", a.url())
        if totals() != want:
            fail(f"after lost done lines: {totals()}, want {want}")
        no_duplicates(a)
        # once more, everything stored: the seven captures are known stored, not read on
        said = tkp(*cmd[1:], "--exit-when-idle", "--url", a.url()).stdout.decode()
        if "ingested 0 captures, 0 rows (7 stored before)" not in said or totals() != want:
            fail(f"a run with everything stored said {said!r}: {totals()}, want {want}")
        # 3. the server ingest talks to stopped while ingest runs, then started again
        extra = capture(os.path.join(work, "late"), ["--steps", "12"], {})
        a.stop()
        log = os.path.join(work, "ingest3.err")
        p = subprocess.Popen([TKP, "ingest", "--url", a.url(), "--settle", "0", "--state",
                              st + ".late", "--label", "host=r-late", extra],
                             stdout=subprocess.DEVNULL, stderr=open(log, "wb"))
        wait_for_line(log, "waiting for ClickHouse", p)
        a.start()
        if p.wait(180) != 0:
            fail(f"ingest after the server came back: exit {p.returncode}: {open(log).read()}")
        same_counts(a, "r-late", extra)
        no_duplicates(a)

    with_live(mini, body)
    print("restart: ok")


def case_watch():
    watch = os.path.join(work, "watch")
    os.makedirs(watch)
    st = os.path.join(work, "state")
    mini = live_minillm(watch, 300)

    def body(servers):
        a, _ = servers
        live = stop_after_steps(mini, watch, 80)
        size = os.path.getsize(live)
        log = os.path.join(work, "ingest.err")
        p = subprocess.Popen([TKP, "ingest", "--url", a.url(), "--state", st, "--batch", "0",
                              "--poll", "0.2", "--label", "host=w-host", "--watch", watch,
                              "--exit-when-idle"],
                             stdout=subprocess.DEVNULL, stderr=open(log, "wb"))
        # rows while the writer is stopped mid-run: its file still open and growing
        n = wait_rows(a, f"pid = {mini.pid}", "while minillm was stopped mid-run", p)
        if mini.poll() is not None or os.path.getsize(live) != size:
            fail("minillm was not stopped mid-run: the test did not bite")
        wait_for_line(log, "waiting for new chunks", p)
        let_go(mini)
        if p.wait(180) != 0:
            fail(f"ingest --watch --exit-when-idle: exit {p.returncode}: {open(log).read()}")
        same_counts(a, "w-host", live)
        total = int(a.query("SELECT count() FROM tokprof.steps WHERE host = 'w-host'"))
        if not n < total:
            fail(f"{n} of {total} steps rows came before minillm ended: not chunk by chunk")
        batches = int(a.query("SELECT max(ingest_batch) FROM tokprof.steps WHERE host = 'w-host'"))
        if batches < 2:
            fail(f"the growing capture's steps came in {batches} batch: not chunk by chunk")
        no_duplicates(a)
        print(f"watch: {n} of {total} steps rows stored while minillm was stopped mid-run, "
              f"{batches} batches")

    with_live(mini, body)
    print("watch: ok")


def case_rotate():
    """ingest --watch follows a capture the shim rotates (TOKPROF_MAX_MB) while it runs: killed
    with SIGKILL once rows of it are stored and several files exist, restarted, minillm let go:
    the rows of every file, once, under one capture_id, as `tokprof table` makes of the files."""
    watch = os.path.join(work, "watch")
    os.makedirs(watch)
    st = os.path.join(work, "state")
    mini = live_minillm(watch, 300, TOKPROF_MAX_MB="0.02", TOKPROF_KEEP="0")
    cmd = [TKP, "ingest", "--state", st, "--batch", "0", "--poll", "0.2", "--label",
           "host=rot-host", "--watch", watch]

    def files():
        return sorted(glob.glob(os.path.join(watch, f"minillm.{mini.pid}*.tokprof")))

    def body(servers):
        a, _ = servers
        deadline = time.time() + 120  # SIGSTOP once the shim has rotated twice
        while len(files()) < 3:
            if mini.poll() is not None or time.time() > deadline:
                fail(f"{len(files())} files with TOKPROF_MAX_MB=0.02 (minillm exit "
                     f"{mini.returncode}): no rotation")
            time.sleep(0.1)
        sigstop(mini)
        log = os.path.join(work, "ingest1.err")
        p = subprocess.Popen(cmd + ["--url", a.url()], stdout=subprocess.DEVNULL,
                             stderr=open(log, "wb"))
        n = wait_rows(a, f"pid = {mini.pid}", "of the rotated capture", p)
        p.send_signal(signal.SIGKILL)
        p.wait()
        let_go(mini)
        rot = files()
        tkp(*cmd[1:], "--exit-when-idle", "--url", a.url())
        same_counts(a, "rot-host", rot)
        ids = int(a.query("SELECT uniqExact(capture_id) FROM tokprof.steps WHERE host = 'rot-host'"))
        if ids != 1:
            fail(f"{len(rot)} rotated files of one process stored under {ids} capture_ids")
        no_duplicates(a)
        total = int(a.query("SELECT count() FROM tokprof.steps WHERE host = 'rot-host'"))
        print(f"rotate: {len(rot)} files, {n} steps rows before the kill, {total} in all")

    with_live(mini, body)
    print("rotate: ok")


def case_containers():
    """Two servers in containers (their own user, PID and UTS namespaces: pid 1 each, host names
    c1 and c2) write into one watched directory at once: ingest --watch keeps their captures
    apart (one pid, two sources) and sees each end by the shim's lock on its files (pid 1 on this
    host is init, alive; the host names are not this host's), so --exit-when-idle ends."""
    probe = subprocess.run(["unshare", "--user", "--map-root-user", "--uts", "--pid", "--fork",
                            "true"], capture_output=True)
    if probe.returncode:  # a container without user namespaces: say so, ctest shows it skipped
        print(f"skipped: unshare cannot make namespaces here: {probe.stderr.decode().strip()}")
        sys.exit(77)
    watch = os.path.join(work, "watch")
    os.makedirs(watch)
    st = os.path.join(work, "state")
    minis = [live_minillm(watch, 150, wrap=("unshare", "--user", "--map-root-user", "--uts",
                                             "--pid", "--fork", "sh", "-c",
                                             f'hostname {h} && LD_PRELOAD="$TKP_PRELOAD" '
                                             'exec "$0" "$@"'))
             for h in ("c1", "c2")]

    def caps():
        return sorted(glob.glob(os.path.join(watch, "minillm.1*.tokprof")))

    def body(servers):
        a, _ = servers
        deadline = time.time() + 60
        while len(caps()) < 2:
            if any(m.poll() is not None for m in minis) or time.time() > deadline:
                fail(f"two containers' captures never appeared: {os.listdir(watch)}")
            time.sleep(0.1)
        log = os.path.join(work, "ingest.err")
        p = subprocess.Popen([TKP, "ingest", "--url", a.url(), "--state", st, "--batch", "0",
                              "--poll", "0.2", "--watch", watch, "--exit-when-idle"],
                             stdout=subprocess.DEVNULL, stderr=open(log, "wb"))
        try:
            rc = p.wait(240)
        except subprocess.TimeoutExpired:
            p.kill()
            fail("ingest --exit-when-idle did not end: the containers' ends were not seen\n"
                 + open(log, errors="replace").read()[-2000:])
        if rc != 0:
            fail(f"ingest: exit {rc}: {open(log, errors='replace').read()[-2000:]}")
        for m in minis:
            if m.wait(60) != 0:
                fail(f"a container's minillm: exit {m.returncode}")
        files = caps()
        if len(files) != 2:
            fail(f"{files}: want minillm.1.tokprof and minillm.1.alt1.tokprof")
        for f in files:
            host = tkp("table", "steps", "--compress", "none", f).stdout.decode() \
                .splitlines()[1].split("\t")[0]
            if host not in ("c1", "c2"):
                fail(f"{f}: host {host!r}, want c1 or c2 (the container's META host name)")
            same_counts(a, host, f)
        ids = int(a.query("SELECT uniqExact(capture_id) FROM tokprof.steps"))
        if ids != 2:
            fail(f"two containers' captures stored under {ids} capture_ids")
        no_duplicates(a)
        print(f"containers: {[os.path.basename(f) for f in files]}, each host exact")

    with_live(minis, body)
    print("containers: ok")


def case_complete():
    """When a capture is whole, told by the shim's lock on its files (no --settle guess): a stream
    capture given as an argument while its writer runs is waited for (it was skipped without a
    word) and ingested whole once the writer ended; a flight-recorder snapshot in a watched
    directory is ingested once written, with --settle 3600 (an hour of guessing before)."""
    live_dir = os.path.join(work, "live")
    os.makedirs(live_dir)
    mini = live_minillm(live_dir, 150)
    live = [mini]  # and the flight-mode one, once started: with_live stops them all

    def body(servers):
        a, _ = servers
        path = os.path.join(live_dir, f"minillm.{mini.pid}.tokprof")
        deadline = time.time() + 60
        while not os.path.exists(path) or os.path.getsize(path) < 4096:
            if mini.poll() is not None or time.time() > deadline:
                fail(f"{path}: never written")
            time.sleep(0.05)
        log = os.path.join(work, "ingest1.err")
        p = subprocess.Popen([TKP, "ingest", "--url", a.url(), "--state",
                              os.path.join(work, "state1"), "--poll", "0.2",
                              "--label", "host=whole", path],
                             stdout=subprocess.PIPE, stderr=open(log, "wb"))
        wait_for_line(log, "waiting for 1 capture still being written to end", p)
        if mini.poll() is not None:
            fail("minillm ended before ingest said it waits: the test did not bite")
        if mini.wait(180) != 0:
            fail(f"minillm: exit {mini.returncode}")
        out, _ = p.communicate(timeout=120)
        if p.returncode != 0 or b"ingested 1 captures" not in out:
            fail(f"ingest of a capture being written: exit {p.returncode}: {out!r} "
                 f"{open(log, errors='replace').read()}")
        same_counts(a, "whole", path)
        # a snapshot: flight mode, the trigger file touched once minillm runs
        snap_dir = os.path.join(work, "snap")
        os.makedirs(snap_dir)
        trig = os.path.join(work, "trigger")
        fl = live_minillm(snap_dir, 150, TOKPROF_MODE="flight", TOKPROF_TRIGGER_FILE=trig,
                          TOKPROF_FLIGHT_BEFORE_S="1", TOKPROF_FLIGHT_AFTER_S="1")
        live.append(fl)
        time.sleep(1.5)
        open(trig, "w").close()
        log = os.path.join(work, "ingest2.err")
        p = subprocess.Popen([TKP, "ingest", "--url", a.url(), "--state",
                              os.path.join(work, "state2"), "--poll", "0.2", "--settle", "3600",
                              "--label", "host=snap", "--watch", snap_dir, "--exit-when-idle"],
                             stdout=subprocess.PIPE, stderr=open(log, "wb"))
        try:
            out, _ = p.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            p.kill()
            fail("the snapshot was not ingested within 120 s with --settle 3600: its lock was "
                 f"not looked at\n{open(log, errors='replace').read()[-1500:]}")
        snaps = glob.glob(os.path.join(snap_dir, "*.snap*.tokprof"))
        if p.returncode != 0 or len(snaps) != 1 or b"ingested 1 captures" not in out:
            fail(f"snapshot ingest: exit {p.returncode}, {snaps}: {out!r}")
        if fl.poll() is None:
            print("complete: the snapshot was stored while its process still ran")
        if fl.wait(180) != 0:
            fail(f"flight minillm: exit {fl.returncode}")
        same_counts(a, "snap", snaps[0])
        no_duplicates(a)

    with_live(live, body)
    print("complete: ok")


def case_moewindow():
    # 1 500 steps of 8 experts top-2: about 470 000 records, 8 windows of 65 536
    c = capture(os.path.join(work, "caps", "m"), ["--moe", "8,2", "--zipf", "1.1", "--batch", "4",
                                                  "--steps", "1500"], {"SIMGPU_ZERO": "1"})
    out, rss = {}, {}
    # under ASan, freed windows would wait in its quarantine: peak RSS would count them all
    asan = os.environ.get("ASAN_OPTIONS", "")
    env = dict(os.environ, ASAN_OPTIONS=(asan + ":" if asan else "") + "quarantine_size_mb=0")
    for w in ("0", "65536"):
        t = os.path.join(work, f"time.{w}")
        p = subprocess.run(["/usr/bin/time", "-o", t, "-f", "%M", TKP, "table", "moe",
                            "--moe-window", w, "--compress", "none", c], capture_output=True,
                           timeout=300, env=env)
        if p.returncode:
            fail(f"table moe --moe-window {w}: exit {p.returncode}: {p.stderr.decode()}")
        out[w], rss[w] = p.stdout, int(open(t).read().split()[-1])
    rows = out["0"].count(b"\n") - 1
    if rows < 1500 * 4 * 8:
        fail(f"table moe: {rows} rows, want one per step, layer and expert")
    if out["0"] != out["65536"]:
        fail("table moe by windows differs from the whole-capture pass")
    if not rss["65536"] < rss["0"]:
        fail(f"table moe by windows peaked at {rss['65536']} KB, the whole pass at {rss['0']} KB")
    print(f"moewindow: {rows} rows equal; peak RSS {rss['0']} KB whole, {rss['65536']} KB by "
          f"windows")


def case_windowed():
    """A TOKPROF_GPU=window:2/10 capture in ClickHouse 18.16, by ingest (Native) and by a TSV
    insert: an untimed step's GPU figures are NULL (not 0), so avg(busy_ns) is the timed steps'
    mean and countIf(busy_ns IS NULL) the untimed steps."""
    c = capture(os.path.join(work, "caps", "w"), [], {"TOKPROF_GPU": "window:2/10"})
    rows = json.loads(tkp("steps", "--json", c).stdout)["steps"]
    timed = [r["busy_ns"] for r in rows if r["busy_ns"] is not None]
    untimed = len(rows) - len(timed)
    if not untimed or not timed:
        fail(f"window:2/10: {len(timed)} timed and {untimed} untimed steps")

    def body(servers):
        a, _ = servers
        ingest(a, "--label", "host=win", c)
        tsv = tkp("table", "steps", "--compress", "none", "--label", "host=wintsv", c).stdout
        cols = tsv.split(b"\n", 1)[0].decode().replace("\t", ", ")
        a.query(f"INSERT INTO tokprof.steps ({cols}) FORMAT TSVWithNames", tsv)
        for host in ("win", "wintsv"):
            got = a.query("SELECT countIf(busy_ns IS NULL), count(busy_ns), sum(busy_ns) FROM "
                          f"tokprof.steps WHERE host = '{host}' FORMAT TSV").split()
            want = [str(untimed), str(len(timed)), str(sum(timed))]
            if got != want:
                fail(f"{host}: NULL, non-NULL busy_ns and their sum {got}, want {want}")

    with_cluster(body)
    print(f"windowed: {untimed} untimed steps NULL, {len(timed)} timed, by ingest and TSV")


def case_hostile():
    # many chunks (a flush every millisecond), so that a cut leaves whole ones before it
    c = capture(os.path.join(work, "caps", "h"), ["--steps", "60"], {"TOKPROF_FLUSH_MS": "1"})
    # torn: cut inside a chunk
    torn = os.path.join(work, "torn.tokprof")
    data = open(c, "rb").read()
    open(torn, "wb").write(data[: len(data) * 2 // 3])
    p = tkp("table", "steps", "--compress", "none", torn, check=False)
    if p.returncode or b"torn tail" not in p.stderr or \
            not 2 < p.stdout.count(b"\n") < steps_rows(c):
        fail(f"torn capture: exit {p.returncode}, stderr {p.stderr}, {len(p.stdout)} bytes")
    # the fuzz corpus: never a crash; an error is one line
    corpus = sorted(glob.glob(os.path.join(HERE, "..", "..", "fuzz", "corpus", "*")))
    for f in corpus:
        for t in TABLES:
            p = tkp("table", t, "--compress", "none", f, check=False)
            if p.returncode not in (0, 1, 2):
                fail(f"table {t} {f}: exit {p.returncode} (a signal?): {p.stderr[-300:]}")
            if p.returncode == 2 and p.stderr.count(b"\n") != 1:
                fail(f"table {t} {f}: exit 2 with {p.stderr!r}")
    # labels with tabs, newlines, quotes, backslashes: in every format
    label = "a\tb\nc'd\\e\"f"
    for fmt in ("tsv", "json", "native"):
        p = tkp("table", "steps", "--format", fmt, "--compress", "gzip", "--label",
                "note=" + label, "-o", os.path.join(work, f"l.{fmt}.gz"), c)
    tsv = gzip.open(os.path.join(work, "l.tsv.gz")).read().decode().splitlines()
    if len(tsv) < 3 or any(len(l.split("\t")) != len(tsv[0].split("\t")) for l in tsv):
        fail("a label with a tab or newline broke the TSV rows")
    row = json.loads(gzip.open(os.path.join(work, "l.json.gz")).readline())
    if row["label_values"] != [label] or row["label_keys"] != ["note"]:
        fail(f"JSON label {row['label_values']!r}, want {[label]!r}")
    # a malformed --label: exit 2, one line
    for bad in ("novalue", "=x", "1a=b", "a b=c"):
        p = tkp("table", "steps", "--label", bad, c, check=False)
        if p.returncode != 2 or p.stderr.count(b"\n") != 1 or b"--label" not in p.stderr:
            fail(f"--label {bad!r}: exit {p.returncode}, {p.stderr!r}")
    p = tkp("table", "steps", "--label", "host=a", "--label", "host=b", c, check=False)
    if p.returncode != 2:
        fail("a label given twice was accepted")
    # an unreadable capture among good ones: named, skipped, exit 1, the others' rows written
    junk = os.path.join(work, "junk.tokprof")
    open(junk, "wb").write(b"not a capture at all")
    p = tkp("table", "steps", "--compress", "none", c, junk, check=False)
    if p.returncode != 1 or junk.encode() not in p.stderr or \
            p.stdout.count(b"\n") - 1 != steps_rows(c):
        fail(f"unreadable input: exit {p.returncode}, {p.stderr!r}")
    # a rotated capture (TOKPROF_MAX_MB): one capture_id, on its files read together or alone,
    # and as many steps rows as `tokprof steps` of the directory
    rot = os.path.join(work, "rot")
    os.makedirs(rot)
    env = dict(os.environ, LD_LIBRARY_PATH=SIM, LD_PRELOAD=shim_preload(SHIM), TOKPROF_OUT=rot,
               TOKPROF_MAX_MB="0.08", TOKPROF_FLUSH_MS="20", TOKPROF_GPU="off")
    subprocess.run([MINILLM, "--steps", "10000", "--graphs"], env=env, check=True,
                   capture_output=True, timeout=300)
    files = sorted(glob.glob(os.path.join(rot, "*.tokprof")))
    if len(files) < 3:
        fail(f"rotation: want 3 or more files, got {files}")
    out = tkp("table", "steps", "--compress", "none", rot).stdout.decode().splitlines()
    ids = {l.split("\t")[4] for l in out[1:]}
    alone = {tkp("table", "steps", "--compress", "none", f).stdout.decode().splitlines()[1]
             .split("\t")[4] for f in files}
    if len(ids) != 1 or alone != ids or len(out) - 1 != steps_rows(rot):
        fail(f"rotated capture: capture_ids {ids} together, {alone} alone; {len(out) - 1} rows, "
             f"tokprof steps says {steps_rows(rot)}")
    # a server error's text is shown (no such database), exit 2; no server: it waits (tested
    # in restart)
    def body(servers):
        p = tkp("ingest", "--url", servers[0].url(), "--database", "nosuchdb", "--settle", "0",
                "--state", os.path.join(work, "st"), c, check=False)
        if p.returncode != 2 or b"nosuchdb" not in p.stderr or b"server said" not in p.stderr:
            fail(f"server error: exit {p.returncode}, {p.stderr!r}")
    with_cluster(body)
    print("hostile: ok")


def structure(table):
    """The table's columns and types, from the schema tokprof ships (less the DEFAULT day)."""
    ddl = tkp("table", "--ddl", "clickhouse").stdout.decode()
    for stmt in ddl.split(";\n"):
        if f".{table}_local (" in stmt:
            cols = stmt.split("_local (", 1)[1].split(", day Date")[0]
            return cols
    fail(f"no {table}_local in the DDL")


def file_queries(exp):
    """The five queries with each tokprof.TABLE read from the exported files by file()."""
    out = {}
    for k, q in queries().items():
        for t in TABLES:
            q = re.sub(rf"\btokprof\.{t}\b",
                       f"file('{exp}/{t}.*.tsv.*', 'TSVWithNames', '{structure(t)}')", q)
        out[k] = q
    return out


def case_chdb():
    if not os.access(CHDB_PY, os.X_OK):
        fail(f"{CHDB_PY} missing: scripts/setup.sh makes the chdb venv")
    caps = make_hosts()
    exp = os.path.join(work, "exp")
    os.makedirs(exp)
    # one file per table and host, zstd for half the hosts and gzip for the others
    for i, (h, c) in enumerate(sorted(caps.items())):
        z, ext = (("zstd", "zst"), ("gzip", "gz"))[i % 2]
        for t in TABLES:
            tkp("table", t, "--compress", z, "--label", f"host={h}", "--label",
                "model=minillm-4l", "-o", os.path.join(exp, f"{t}.{h}.tsv.{ext}"), c)
    res18 = {}

    def body(servers):
        a = servers[0]
        for h, c in sorted(caps.items()):
            for t in TABLES:
                cols = tkp("table", t, "--columns").stdout.decode().strip()
                data = tkp("table", t, "--compress", "none", "--label", f"host={h}", "--label",
                           "model=minillm-4l", c).stdout
                a.query(f"INSERT INTO tokprof.{t} ({cols}) FORMAT TSVWithNames", data)
        res18.update(run_queries(a.query))

    with_cluster(body)
    qs = file_queries(exp)
    p = subprocess.run([CHDB_PY, "-c", CHDB_SCRIPT], input=json.dumps(qs).encode(),
                       capture_output=True, timeout=600)
    if p.returncode:
        fail(f"chdb: exit {p.returncode}: {p.stderr.decode()[-1500:]}")
    resnew = json.loads(p.stdout)
    for k in sorted(qs):
        if resnew[k] != res18[k]:
            fail(f"{k}: chdb answered\n{resnew[k]}\nClickHouse 18.16 answered\n{res18[k]}")
    check_answers(resnew)
    print(f"chdb: ok ({len(qs)} queries, same answers as 18.16)")


# Runs in the chdb venv: {Qn: sql} on stdin, {Qn: TSV answer} on stdout.
CHDB_SCRIPT = """
import json, sys
import chdb
qs = json.load(sys.stdin)
out = {k: chdb.query(q, "TabSeparated").data() for k, q in qs.items()}
json.dump(out, sys.stdout)
"""

if __name__ == "__main__":
    # a SIGTERM (ctest stopping the test) still runs the finally that stops the servers
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    {"cluster": case_cluster, "restart": case_restart, "watch": case_watch,
     "moewindow": case_moewindow, "hostile": case_hostile, "chdb": case_chdb,
     "rotate": case_rotate, "containers": case_containers, "complete": case_complete,
     "windowed": case_windowed}[case]()
