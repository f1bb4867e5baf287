/* TOKPROF_* environment variables: one table (name, parser, default, README line), read once at
 * start. A bad value never stops the program: it gets one warning line and the default.
 * README.md's table of variables is this table (tests/unit/shim/test_config.c compares them).
 * LTTng-UST keeps its variables the same way (src/common/getenv.c: one lttng_env[] read once).
 *
 * Secure execution. A setuid or setgid program, or one with file capabilities, runs with more
 * privilege than the user who set its environment: glibc marks it AT_SECURE and ignores
 * LD_LIBRARY_PATH and most of LD_PRELOAD, but a shim installed in /etc/ld.so.preload still
 * loads. There the environment is the attacker's input (TOKPROF_OUT names where a privileged
 * process writes, TOKPROF_CUPTI_PATH what it dlopens), so such a process records nothing:
 * tkp_start_slow() asks tkp_secure_exec() before it reads any variable, and the one read below is
 * secure_getenv(3), which answers NULL there anyway. LTTng-UST refuses only the dangerous
 * variables (clock and getcpu plugin paths, HOME) in a setuid process, judged by euid != uid or
 * egid != gid; we ask the kernel's AT_SECURE instead, which also covers file capabilities, and
 * refuse every variable: none of ours is harmless enough to allow (even TOKPROF_LOG would let
 * the caller write into a privileged process's stderr).
 *
 * TOKPROF_STEP's regex is compiled here, under init.c's once, before any hook records: the step
 * detector on application threads only runs it (issue 33: compiled lazily there, two threads'
 * first launches raced on one regex_t). */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/auxv.h>

#include "core/config.h"
#include "core/log.h"

struct tkp_config tkp_cfg;
struct tkp_prod_config tkp_prod;
static int step_re_compiled;

int tkp_secure_exec(void)
{
    return getauxval(AT_SECURE) != 0;
}

static void copy_str(char *dst, size_t cap, const char *src)
{
    size_t n = strlen(src);
    if (n >= cap) n = cap - 1;
    memcpy(dst, src, n);
    dst[n] = 0;
}

void tkp_config_note_program(void)
{
    const char *n = program_invocation_short_name;
    copy_str(tkp_cfg.program, sizeof tkp_cfg.program, n && *n ? n : "program");
}

/* ---- parsers: v is the value, NULL when unset; 0, or -1 when v is not valid ---------------- */

/* A decimal number in [lo, hi] (MB and seconds may be fractional: "0.25"), times scale. */
static int p_num(const struct tkp_setting *s, const char *v)
{
    char *end;
    errno = 0;
    double x = v ? strtod(v, &end) : 0;
    if (!v || errno || *end || end == v || !(x >= s->lo && x <= s->hi)) return -1;
    x *= s->scale;
    if (s->size == 8) *(uint64_t *)s->dst = (uint64_t)x;
    else *(unsigned *)s->dst = (unsigned)x;
    return 0;
}

/* A path or a name, shorter than its place. */
static int p_str(const struct tkp_setting *s, const char *v)
{
    if (v && strlen(v) >= s->size) return -1;
    copy_str(s->dst, s->size, v ? v : "");
    return 0;
}

/* One of the words of s->want ("a|b|c", any case), stored as its index (an enum's value). */
static int p_word(const struct tkp_setting *s, const char *v)
{
    if (!v) return -1;
    size_t n = strlen(v);
    int i = 0;
    for (const char *w = s->want; *w; i++) {
        size_t k = strcspn(w, "|");
        if (k == n && !strncasecmp(w, v, n)) {
            *(int *)s->dst = i;
            return 0;
        }
        w += k + (w[k] == '|');
    }
    return -1;
}

static int p_log(const struct tkp_setting *s, const char *v)
{
    static const int level[] = {TKP_LOG_QUIET, TKP_LOG_WARN, TKP_LOG_DEBUG};
    int i;
    struct tkp_setting w = *s;
    w.dst = &i;
    if (p_word(&w, v)) return -1;
    tkp_log_level = level[i];
    return 0;
}

/* TOKPROF_DISABLE: any value but 0. */
static int p_disable(const struct tkp_setting *s, const char *v)
{
    (void)s;
    tkp_cfg.disabled = v && strcmp(v, "0") != 0;
    return 0;
}

static int p_step(const struct tkp_setting *s, const char *v)
{
    static const struct {
        const char *word;
        int mode;
    } words[] = {{"auto", TKP_STEPMODE_AUTO},
                 {"sync", TKP_STEPMODE_SYNC},
                 {"graph", TKP_STEPMODE_GRAPH},
                 {"marker", TKP_STEPMODE_MARKER}};
    (void)s;
    if (!v) return -1;
    if (step_re_compiled) regfree(&tkp_cfg.step_re);
    step_re_compiled = 0;
    tkp_cfg.step_regex[0] = 0;
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
        if (!strcmp(v, words[i].word)) {
            tkp_cfg.step_mode = words[i].mode;
            return 0;
        }
    int mode = !strncmp(v, "nvtx:", 5)     ? TKP_STEPMODE_NVTX
               : !strncmp(v, "kernel:", 7) ? TKP_STEPMODE_KERNEL
                                           : -1;
    const char *re = mode < 0 ? "" : strchr(v, ':') + 1;
    if (!*re || strlen(re) >= sizeof tkp_cfg.step_regex ||
        regcomp(&tkp_cfg.step_re, re, REG_EXTENDED | REG_NOSUB))
        return -1;
    step_re_compiled = 1;
    copy_str(tkp_cfg.step_regex, sizeof tkp_cfg.step_regex, re);
    tkp_cfg.step_mode = mode;
    return 0;
}

static int p_stacks(const struct tkp_setting *s, const char *v)
{
    (void)s;
    if (!v) return -1;
    if (!strcmp(v, "off")) {
        tkp_cfg.stacks_mode = TKP_STACKS_OFF;
        return 0;
    }
    int mode = !strncmp(v, "first:", 6)    ? TKP_STACKS_FIRST
               : !strncmp(v, "sample:", 7) ? TKP_STACKS_SAMPLE
                                           : TKP_STACKS_OFF;
    if (mode == TKP_STACKS_OFF) return -1;
    char *end;
    errno = 0;
    unsigned long x = strtoul(strchr(v, ':') + 1, &end, 10);
    if (errno || *end || x < 1 || x > 1000000000ul) return -1;
    tkp_cfg.stacks_mode = mode;
    tkp_cfg.stacks_every = (uint32_t)x;
    return 0;
}

static int p_gpu(const struct tkp_setting *s, const char *v)
{
    unsigned n, m;
    char c;
    if (v && sscanf(v, "window:%u/%u%c", &n, &m, &c) == 2 && n >= 1 && m >= n) {
        tkp_cfg.gpu_mode = TKP_GPUMODE_WINDOW;
        tkp_cfg.gpu_win_n = n;
        tkp_cfg.gpu_win_m = m;
        return 0;
    }
    static const int mode[] = {TKP_GPUMODE_ALWAYS, TKP_GPUMODE_OFF, TKP_GPUMODE_TRIGGER};
    int i;
    struct tkp_setting w = *s;
    w.dst = &i;
    w.want = "always|off|trigger";
    if (p_word(&w, v)) return -1;
    tkp_cfg.gpu_mode = mode[i];
    return 0;
}

/* "step>40ms", "step>0.5s", "step>3*p50" (also "3xp50"); unset: no step trigger. */
static int p_trigger(const struct tkp_setting *s, const char *v)
{
    (void)s;
    tkp_prod.step_trigger = 0;
    if (!v) return 0;
    if (strncmp(v, "step>", 5)) return -1;
    v += 5;
    char *end;
    double x = strtod(v, &end);
    if (end == v || !(x > 0)) return -1;
    if ((*end == '*' || *end == 'x') && !strcmp(end + 1, "p50")) {
        tkp_prod.step_trigger = 2;
        tkp_prod.step_factor = x;
        return 0;
    }
    double unit = !strcmp(end, "ms") ? 1e6 : !strcmp(end, "us") ? 1e3 : !strcmp(end, "s") ? 1e9 : 0;
    if (!unit || x * unit > 1e18) return -1;
    tkp_prod.step_trigger = 1;
    tkp_prod.step_ns = (uint64_t)(x * unit);
    return 0;
}

static int p_signal(const struct tkp_setting *s, const char *v)
{
    (void)s;
    if (!v) return -1;
    int sig = -1;
    char *end;
    if (!strcasecmp(v, "none") || !strcmp(v, "0")) sig = 0;
    else {
        if (!strncasecmp(v, "SIG", 3)) v += 3;
        if (!strcasecmp(v, "USR1")) sig = SIGUSR1;
        else if (!strcasecmp(v, "USR2")) sig = SIGUSR2;
        else if (!strcasecmp(v, "HUP")) sig = SIGHUP;
        else if (!strcasecmp(v, "PWR")) sig = SIGPWR;
        else if (!strncasecmp(v, "RTMIN+", 6)) {
            long n = strtol(v + 6, &end, 10);
            if (!*end && n >= 0 && SIGRTMIN + n <= SIGRTMAX) sig = SIGRTMIN + (int)n;
        } else {
            long n = strtol(v, &end, 10);
            if (*v && !*end && n > 0 && n < NSIG && n != SIGKILL && n != SIGSTOP) sig = (int)n;
        }
    }
    if (sig < 0) return -1;
    tkp_prod.signal = sig;
    return 0;
}

/* ---- the table ----------------------------------------------------------------------------- */

#define STR_(x) #x
#define STR(x) STR_(x)
#define NUM(place, lo_, hi_, scale_)                                                               \
    .parse = p_num, .dst = &(place), .size = sizeof(place), .lo = (lo_), .hi = (hi_),            \
    .scale = (scale_)
#define TEXT(place) .parse = p_str, .dst = (place), .size = sizeof(place)
#define WORD(place, words) .parse = p_word, .dst = &(place), .want = (words)

static const struct tkp_setting table[] = {
    {"TOKPROF_LOG", .parse = p_log, .def = "warn", .want = "quiet|warn|debug",
     .doc = "`quiet`, `warn` or `debug`, on stderr"},
    {"TOKPROF_DISABLE", .parse = p_disable, .def = NULL,
     .doc = "any value but `0`: the shim forwards every call and records nothing"},
    {"TOKPROF_OUT", TEXT(tkp_cfg.out_dir), .def = ".", .want = "a path under 512 bytes",
     .doc = "directory for captures; refused (one line, capture off) when it is a symbolic link, "
       "another user's (root's with the sticky bit excepted), or writable by others without "
       "the sticky bit. Set it for a deployment ([docs/OPERATIONS.md](docs/OPERATIONS.md), "
       "\"Files and directories\")"},
    {"TOKPROF_STEP", .parse = p_step, .def = "auto",
     .want = "auto|sync|graph|marker|nvtx:RE|kernel:RE (RE a POSIX extended regex)",
     .doc = "how steps (one token per sequence) are found: `auto`, `sync`, `graph`, "
       "`nvtx:REGEX`, `kernel:REGEX`, `marker` (below)"},
    {"TOKPROF_BUFFER_MB", NUM(tkp_cfg.buffer_mb, 1, 65536, 1), .def = "64",
     .doc = "memory for all per-thread rings together; a thread that finds none drops (and "
       "counts) its records"},
    {"TOKPROF_RING_KB", NUM(tkp_cfg.ring_kb, 4, 1048576, 1), .def = "1024",
     .doc = "one thread's ring (64-byte records); a full ring drops and counts, never blocks"},
    {"TOKPROF_FLUSH_MS", NUM(tkp_cfg.flush_ms, 1, 600000, 1), .def = "200",
     .doc = "longest time between two chunks on disk"},
    {"TOKPROF_STEP_COPY_MAX", NUM(tkp_cfg.step_copy_max, 1, 1u << 30, 1), .def = "4194304",
     .doc = "`auto`: the largest device-to-host copy that can end a step"},
    {"TOKPROF_STACKS", .parse = p_stacks, .def = "off",
     .want = "off|first:K|sample:N (1..1e9)",
     .doc = "host call stacks of launches, for `tokprof stacks`: `first:K` the first K launches "
       "of each kernel, `sample:N` one launch in N per thread (~300 ns per sampled launch)"},
    {"TOKPROF_STACKS_UNWINDER", WORD(tkp_cfg.stacks_unwinder, "auto|backtrace|libunwind"),
     .def = "auto",
     .doc = "`auto`/`libunwind`: `libunwind.so.8` (dlopen'ed when stacks are on), else glibc "
       "`backtrace()` (~10× slower); `backtrace` forces the latter"},
    {"TOKPROF_GPU", .parse = p_gpu, .def = "always",
     .want = "always|off|trigger|window:N/M (1<=N<=M)",
     .doc = "tier 2, GPU start/end of every kernel and copy through CUPTI: `always`, "
       "`window:N/M` (N steps out of every M), `trigger` (SIGUSR2 arms the next "
       "`TOKPROF_GPU_TRIGGER_STEPS`), `off`. Without CUPTI, under nsys/torch.profiler, or "
       "without a GPU: one warning, tier 1 goes on, the capture says why"},
    {"TOKPROF_GPU_TRIGGER_STEPS", NUM(tkp_cfg.gpu_trigger_steps, 1, 1e9, 1), .def = "10",
     .doc = "`TOKPROF_GPU=trigger`: how many steps a trigger arms"},
    {"TOKPROF_GPU_BUFFER_MB", NUM(tkp_cfg.gpu_buffer_mb, 1, 65536, 1), .def = "32",
     .doc = "host memory for CUPTI activity buffers (past it CUPTI drops and counts)"},
    {"TOKPROF_CUPTI_PATH", TEXT(tkp_cfg.cupti_path), .def = "libcupti.so.13",
     .want = "a path under 512 bytes",
     .doc = "the CUPTI library to load"},
    {"TOKPROF_CLOCK", WORD(tkp_cfg.clock, "auto|monotonic|tsc"), .def = "auto",
     .doc = "how records are stamped: `auto` uses the TSC where the kernel's clocksource is "
       "`tsc` (constant, nonstop), converted to CLOCK_MONOTONIC ns by the writer; "
       "`monotonic` calls clock_gettime for every record. Captures always hold "
       "CLOCK_MONOTONIC ns"},
    {"TOKPROF_MODE", WORD(tkp_prod.flight, "stream|flight"), .def = "stream",
     .doc = "`stream` (write everything) or `flight` (keep the last seconds in memory, write "
       "snapshots on a trigger)"},
    /* Bounded by default (docs/OPERATIONS.md, "Disk"): 256 MB files, the newest 4 kept, so
     * one process never holds more than about 1 GiB; 0 lifts either bound. */
    {"TOKPROF_MAX_MB", NUM(tkp_prod.max_bytes, 0, 1 << 24, 1048576.0),
     .def = STR(TKP_DEFAULT_MAX_MB),
     .doc = "stream: rotate to `<program>.<pid>.<K>.tokprof` before a file passes this size (0: "
       "no cap)"},
    {"TOKPROF_KEEP", NUM(tkp_prod.keep, 0, 65535, 1), .def = STR(TKP_DEFAULT_KEEP),
     .doc = "keep the newest K files of the process (rotated files or snapshots; 0: all): with "
       "`TOKPROF_MAX_MB`, about 1 GiB per process by default"},
    {"TOKPROF_MIN_FREE_MB", NUM(tkp_prod.min_free_bytes, 0, 1 << 30, 1048576.0),
     .def = STR(TKP_DEFAULT_MIN_FREE_MB),
     .doc = "stop writing (one line, a LOSS record saying so) before the output filesystem's "
       "free space falls under this"},
    {"TOKPROF_MIN_FREE_PCT", NUM(tkp_prod.min_free_pct, 0, 100, 1),
     .def = STR(TKP_DEFAULT_MIN_FREE_PCT),
     .doc = "… or under this percentage of its size, whichever is higher"},
    {"TOKPROF_FLIGHT_MB", NUM(tkp_prod.flight_bytes, 0.01, 1 << 16, 1048576.0), .def = "64",
     .doc = "flight: memory for the retained compressed chunks"},
    {"TOKPROF_FLIGHT_BEFORE_S", NUM(tkp_prod.before_ns, 0, 86400, 1e9), .def = "10",
     .doc = "flight: seconds before the trigger in a snapshot"},
    {"TOKPROF_FLIGHT_AFTER_S", NUM(tkp_prod.after_ns, 0, 86400, 1e9), .def = "2",
     .doc = "flight: seconds after the trigger in a snapshot"},
    {"TOKPROF_TRIGGER", .parse = p_trigger, .def = NULL,
     .want = "step>Nms|step>Ns|step>F*p50",
     .doc = "flight: `step>40ms`, `step>3*p50` — a slow token step takes a snapshot"},
    {"TOKPROF_TRIGGER_SIGNAL", .parse = p_signal, .def = "USR2",
     .want = "a signal (USR1, USR2, RTMIN+N, a number, none)",
     .doc = "flight: a signal that takes a snapshot (`none` to disable)"},
    {"TOKPROF_TRIGGER_FILE", TEXT(tkp_prod.trigger_file), .def = NULL,
     .want = "a path under 512 bytes",
     .doc = "flight: touching this file takes a snapshot"},
    {"TOKPROF_TRIGGER_MIN_S", NUM(tkp_prod.min_gap_ns, 0, 86400 * 365, 1e9), .def = "60",
     .doc = "at most one snapshot per period; further triggers are counted"},
    {"TOKPROF_TEST_WRITER_DELAY_MS", NUM(tkp_prod.test_delay_ms, 0, 600000, 1), .def = "0",
     .doc = "tests only: each chunk write takes this long (a slow disk)"},
};

const struct tkp_setting *tkp_settings(size_t *n)
{
    *n = sizeof table / sizeof table[0];
    return table;
}

/* v, else (bad: one warning) the default. */
static int set(const struct tkp_setting *s, const char *v)
{
    if (v && !*v) v = NULL; /* set but empty: unset */
    if (v && !s->parse(s, v)) return 0;
    if (!v && !s->parse(s, s->def)) return 0;
    if (v) {
        char range[64];
        if (!s->want) snprintf(range, sizeof range, "a number in [%g, %g]", s->lo, s->hi);
        tkp_warn("%s=%s is not %s; using %s", s->name, v, s->want ? s->want : range,
                 s->def ? s->def : "none");
    }
    s->parse(s, s->def);
    return v ? -1 : 0;
}

int tkp_config_set(const char *name, const char *value)
{
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (!strcmp(table[i].name, name)) return set(&table[i], value);
    return -2;
}

void tkp_config_load(void)
{
    if (!tkp_cfg.program[0]) tkp_config_note_program(); /* a start without the constructor */
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        set(&table[i], secure_getenv(table[i].name));
}
