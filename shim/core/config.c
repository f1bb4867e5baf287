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
static uint32_t step_re_gens; /* compiles of TOKPROF_STEP's regex so far (tkp_cfg.step_re_gen) */

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

/* 'u' a whole number, 'n' a decimal one (MB and seconds may be fractional: "0.25"), in [lo, hi],
 * times scale. */
static int p_num(const struct tkp_setting *s, const char *v)
{
    char *end;
    errno = 0;
    double x = v ? strtod(v, &end) : 0;
    if (!v || errno || *end || end == v || !(x >= s->lo && x <= s->hi)) return -1;
    if (s->kind == 'u' && (strpbrk(v, ".eExXpP") || x != (double)(uint64_t)x)) return -1;
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

/* One of the words of s->values ("a|b|c"; 'C': any case), stored as its index (an enum's
 * value). */
static int p_word(const struct tkp_setting *s, const char *v)
{
    if (!v) return -1;
    size_t n = strlen(v);
    int i = 0;
    for (const char *w = s->values; *w; i++) {
        size_t k = strcspn(w, "|");
        if (k == n && !(s->kind == 'C' ? strncasecmp : strncmp)(w, v, n)) {
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

/* 'b': any value but 0 turns it on. */
static int p_switch(const struct tkp_setting *s, const char *v)
{
    *(int *)s->dst = v && strcmp(v, "0") != 0;
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
    tkp_cfg.step_re_gen = ++step_re_gens;
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
    w.values = "always|off|trigger";
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

enum setting_id {
#define TKP_SETTING(name, kind, def, lo, hi, values, doc) S_##name,
#include "tokprof/settings.def"
#undef TKP_SETTING
    S_COUNT
};

/* Where each value goes; a parser of its own where its kind's will not do (values with
 * placeholders, or a value that sets several fields). A name settings.def lacks does not compile. */
#define NUM(place, scale_) .dst = &(place), .size = sizeof(place), .scale = (scale_)
#define TEXT(place) .dst = (place), .size = sizeof(place)
#define MB 1048576.0
#define S 1e9
static const struct tkp_setting places[S_COUNT] = {
    [S_TOKPROF_LOG] = {.parse = p_log},
    [S_TOKPROF_DISABLE] = {.dst = &tkp_cfg.disabled},
    [S_TOKPROF_OUT] = {TEXT(tkp_cfg.out_dir)},
    [S_TOKPROF_STEP] = {.parse = p_step},
    [S_TOKPROF_BUFFER_MB] = {NUM(tkp_cfg.buffer_mb, 1)},
    [S_TOKPROF_RING_KB] = {NUM(tkp_cfg.ring_kb, 1)},
    [S_TOKPROF_FLUSH_MS] = {NUM(tkp_cfg.flush_ms, 1)},
    [S_TOKPROF_STEP_COPY_MAX] = {NUM(tkp_cfg.step_copy_max, 1)},
    [S_TOKPROF_STACKS] = {.parse = p_stacks},
    [S_TOKPROF_STACKS_UNWINDER] = {.dst = &tkp_cfg.stacks_unwinder},
    [S_TOKPROF_GPU] = {.parse = p_gpu},
    [S_TOKPROF_GPU_TRIGGER_STEPS] = {NUM(tkp_cfg.gpu_trigger_steps, 1)},
    [S_TOKPROF_GPU_BUFFER_MB] = {NUM(tkp_cfg.gpu_buffer_mb, 1)},
    [S_TOKPROF_CUPTI_PATH] = {TEXT(tkp_cfg.cupti_path)},
    [S_TOKPROF_CLOCK] = {.dst = &tkp_cfg.clock},
    [S_TOKPROF_MODE] = {.dst = &tkp_prod.flight},
    /* Bounded by default (docs/OPERATIONS.md, "Disk"): 256 MB files, the newest 4 kept, so one
     * process never holds more than about 1 GiB; 0 lifts either bound (settings.def). */
    [S_TOKPROF_MAX_MB] = {NUM(tkp_prod.max_bytes, MB)},
    [S_TOKPROF_KEEP] = {NUM(tkp_prod.keep, 1)},
    [S_TOKPROF_MIN_FREE_MB] = {NUM(tkp_prod.min_free_bytes, MB)},
    [S_TOKPROF_MIN_FREE_PCT] = {NUM(tkp_prod.min_free_pct, 1)},
    [S_TOKPROF_FLIGHT_MB] = {NUM(tkp_prod.flight_bytes, MB)},
    [S_TOKPROF_FLIGHT_BEFORE_S] = {NUM(tkp_prod.before_ns, S)},
    [S_TOKPROF_FLIGHT_AFTER_S] = {NUM(tkp_prod.after_ns, S)},
    [S_TOKPROF_TRIGGER] = {.parse = p_trigger},
    [S_TOKPROF_TRIGGER_SIGNAL] = {.parse = p_signal},
    [S_TOKPROF_TRIGGER_FILE] = {TEXT(tkp_prod.trigger_file)},
    [S_TOKPROF_TRIGGER_MIN_S] = {NUM(tkp_prod.min_gap_ns, S)},
    [S_TOKPROF_TEST_WRITER_DELAY_MS] = {NUM(tkp_prod.test_delay_ms, 1)},
};
#undef MB
#undef S

static struct tkp_setting table[S_COUNT];

/* settings.def's rows, with their places; the kinds' parsers where none is given. */
static void table_init(void)
{
    static const struct tkp_setting described[S_COUNT] = {
#define TKP_SETTING(name_, kind_, def_, lo_, hi_, values_, doc_)                                   \
    [S_##name_] = {.name = #name_, .kind = kind_, .def = def_, .lo = lo_, .hi = hi_,             \
                   .values = values_, .doc = doc_},
#include "tokprof/settings.def"
#undef TKP_SETTING
    };
    for (int i = 0; i < S_COUNT; i++) {
        struct tkp_setting *t = &table[i];
        *t = described[i];
        t->parse = places[i].parse;
        t->dst = places[i].dst;
        t->size = places[i].size;
        t->scale = places[i].scale;
        if (!t->parse)
            t->parse = t->kind == 'u' || t->kind == 'n' ? p_num
                       : t->kind == 's'                 ? p_str
                       : t->kind == 'b'                 ? p_switch
                                                        : p_word;
    }
}

const struct tkp_setting *tkp_settings(size_t *n)
{
    if (!table[0].name) table_init();
    *n = S_COUNT;
    return table;
}

/* v, else (bad: one warning) the default. */
static int set(const struct tkp_setting *s, const char *v)
{
    const char *def = *s->def ? s->def : NULL;
    if (v && !*v) v = NULL; /* set but empty: unset */
    if (v && !s->parse(s, v)) return 0;
    if (v) {
        char want[64];
        if (s->kind == 'u' || s->kind == 'n')
            snprintf(want, sizeof want, "a %s in [%g, %g]",
                     s->kind == 'u' ? "whole number" : "number", s->lo, s->hi);
        else if (s->kind == 's')
            snprintf(want, sizeof want, "shorter than %u bytes", s->size);
        tkp_warn("%s=%s is not %s; using %s", s->name, v, s->values ? s->values : want,
                 def ? def : "none");
    }
    s->parse(s, def);
    return v ? -1 : 0;
}

int tkp_config_set(const char *name, const char *value)
{
    size_t n;
    const struct tkp_setting *t = tkp_settings(&n);
    for (size_t i = 0; i < n; i++)
        if (!strcmp(t[i].name, name)) return set(&t[i], value);
    return -2;
}

void tkp_config_load(void)
{
    if (!tkp_cfg.program[0]) tkp_config_note_program(); /* a start without the constructor */
    size_t n;
    const struct tkp_setting *t = tkp_settings(&n);
    for (size_t i = 0; i < n; i++)
        set(&t[i], secure_getenv(t[i].name));
}
