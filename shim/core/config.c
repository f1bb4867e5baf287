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

/* Which of s->values v is ("a|b|c"; 'C': any case): the alternative's index, or -1. An
 * alternative with placeholders ("nvtx:{RE}", "window:{N}/{M}", "step>{F}ms") matches a v that
 * starts with its text before the first placeholder and ends with its text after the last; *arg,
 * *argn are then what they stand for (v's middle), for the parser to check; a plain word gives
 * *arg NULL. The first alternative that matches wins. The parsers below map the index to their
 * values by settings.def's order and refuse everything when the count of alternatives is not
 * theirs (tests/unit/shim/test_config.c feeds every alternative and checks what it sets). */
static int choice(const struct tkp_setting *s, const char *v, const char **arg, size_t *argn)
{
    int (*ncmp)(const char *, const char *, size_t) = s->kind == 'C' ? strncasecmp : strncmp;
    size_t n = strlen(v);
    int i = 0;
    for (const char *w = s->values; *w; i++) {
        size_t k = strcspn(w, "|"), pre = strcspn(w, "{");
        if (pre >= k) { /* a word */
            if (k == n && !ncmp(w, v, n)) {
                *arg = NULL, *argn = 0;
                return i;
            }
        } else {
            size_t last = k;
            while (w[last - 1] != '}')
                last--;
            size_t suf = k - last;
            if (n >= pre + suf && !ncmp(w, v, pre) && !ncmp(w + last, v + n - suf, suf)) {
                *arg = v + pre, *argn = n - pre - suf;
                return i;
            }
        }
        w += k + (w[k] == '|');
    }
    return -1;
}

/* How many alternatives s->values has. */
static size_t choices(const struct tkp_setting *s)
{
    size_t n = 1;
    for (const char *w = s->values; *w; w++)
        n += *w == '|';
    return n;
}

/* The index of v among s->values when there are exactly `want` of them, else -1. */
static int choice_of(const struct tkp_setting *s, const char *v, size_t want, const char **arg,
                     size_t *argn)
{
    return v && choices(s) == want ? choice(s, v, arg, argn) : -1;
}

/* A placeholder's whole number: digits only, in [lo, hi]; -1 when not. */
static long long whole(const char *arg, size_t n, long long lo, long long hi)
{
    long long x = 0;
    if (!n || n > 18) return -1;
    for (size_t i = 0; i < n; i++) {
        if (arg[i] < '0' || arg[i] > '9') return -1;
        x = x * 10 + (arg[i] - '0');
    }
    return x >= lo && x <= hi ? x : -1;
}

/* 'c', 'C' without placeholders: the word's index (an enum's value). */
static int p_word(const struct tkp_setting *s, const char *v)
{
    const char *arg;
    size_t argn;
    int i = v ? choice(s, v, &arg, &argn) : -1;
    if (i < 0 || arg) return -1;
    *(int *)s->dst = i;
    return 0;
}

static int p_log(const struct tkp_setting *s, const char *v)
{
    static const int level[] = {TKP_LOG_QUIET, TKP_LOG_WARN, TKP_LOG_DEBUG};
    const char *arg;
    size_t argn;
    int i = choice_of(s, v, sizeof level / sizeof level[0], &arg, &argn);
    if (i < 0) return -1;
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
    /* auto|sync|graph|marker|nvtx:{RE}|kernel:{RE} */
    static const int mode[] = {TKP_STEPMODE_AUTO,   TKP_STEPMODE_SYNC, TKP_STEPMODE_GRAPH,
                               TKP_STEPMODE_MARKER, TKP_STEPMODE_NVTX, TKP_STEPMODE_KERNEL};
    const char *re;
    size_t n;
    int i = choice_of(s, v, sizeof mode / sizeof mode[0], &re, &n);
    if (i < 0) return -1;
    if (step_re_compiled) regfree(&tkp_cfg.step_re);
    step_re_compiled = 0;
    tkp_cfg.step_regex[0] = 0;
    if (re && (!n || n >= sizeof tkp_cfg.step_regex ||
               regcomp(&tkp_cfg.step_re, re, REG_EXTENDED | REG_NOSUB)))
        return -1;
    if (re) {
        step_re_compiled = 1;
        tkp_cfg.step_re_gen = ++step_re_gens;
        copy_str(tkp_cfg.step_regex, sizeof tkp_cfg.step_regex, re);
    }
    tkp_cfg.step_mode = mode[i];
    return 0;
}

static int p_stacks(const struct tkp_setting *s, const char *v)
{
    /* off|first:{N}|sample:{N} */
    static const int mode[] = {TKP_STACKS_OFF, TKP_STACKS_FIRST, TKP_STACKS_SAMPLE};
    const char *arg = NULL;
    size_t n = 0;
    int i = choice_of(s, v, sizeof mode / sizeof mode[0], &arg, &n);
    long long x = i >= 0 && arg ? whole(arg, n, 1, 1000000000) : 0;
    if (i < 0 || x < 0) return -1;
    tkp_cfg.stacks_mode = mode[i];
    if (arg) tkp_cfg.stacks_every = (uint32_t)x;
    return 0;
}

static int p_gpu(const struct tkp_setting *s, const char *v)
{
    /* always|off|trigger|window:{N}/{M} */
    static const int mode[] = {TKP_GPUMODE_ALWAYS, TKP_GPUMODE_OFF, TKP_GPUMODE_TRIGGER,
                               TKP_GPUMODE_WINDOW};
    const char *arg;
    size_t n;
    int i = choice_of(s, v, sizeof mode / sizeof mode[0], &arg, &n);
    if (i < 0) return -1;
    if (arg) {
        size_t k = strcspn(arg, "/");
        long long w = k < n ? whole(arg, k, 1, UINT32_MAX) : -1;
        long long m = w < 0 ? -1 : whole(arg + k + 1, n - k - 1, w, UINT32_MAX);
        if (m < 0) return -1;
        tkp_cfg.gpu_win_n = (unsigned)w;
        tkp_cfg.gpu_win_m = (unsigned)m;
    }
    tkp_cfg.gpu_mode = mode[i];
    return 0;
}

/* "step>40ms", "step>0.5s", "step>3*p50" (also "3xp50"); unset: no step trigger. */
static int p_trigger(const struct tkp_setting *s, const char *v)
{
    /* step>{F}ms|step>{F}us|step>{F}s|step>{F}*p50|step>{F}xp50: ns per unit, 0 times the p50 */
    static const double unit[] = {1e6, 1e3, 1e9, 0, 0};
    const char *arg;
    size_t n;
    tkp_prod.step_trigger = 0;
    if (!v) return 0;
    int i = choice_of(s, v, sizeof unit / sizeof unit[0], &arg, &n);
    char *end;
    double x = i < 0 || !arg ? 0 : strtod(arg, &end);
    if (i < 0 || !arg || end != arg + n || !(x > 0) || x * unit[i] > 1e18) return -1;
    if (!unit[i]) {
        tkp_prod.step_trigger = 2;
        tkp_prod.step_factor = x;
        return 0;
    }
    tkp_prod.step_trigger = 1;
    tkp_prod.step_ns = (uint64_t)(x * unit[i]);
    return 0;
}

static int p_signal(const struct tkp_setting *s, const char *v)
{
    /* none|0|USR1|USR2|HUP|PWR|RTMIN+{I}|SIGUSR1|SIGUSR2|SIGHUP|SIGPWR|SIGRTMIN+{I}|{N}:
     * RTMIN for SIGRTMIN + {I}, NUM for {N} */
    enum { RTMIN = -1, NUM = -2 };
    static const int sig[] = {0,       0,       SIGUSR1, SIGUSR2, SIGHUP, SIGPWR, RTMIN,
                              SIGUSR1, SIGUSR2, SIGHUP,  SIGPWR,  RTMIN,  NUM};
    const char *arg;
    size_t n;
    int i = choice_of(s, v, sizeof sig / sizeof sig[0], &arg, &n);
    if (i < 0) return -1;
    long long x = sig[i];
    if (sig[i] == RTMIN) x = whole(arg, n, 0, SIGRTMAX - SIGRTMIN), x = x < 0 ? -1 : SIGRTMIN + x;
    if (sig[i] == NUM) x = whole(arg, n, 1, NSIG - 1), x = x == SIGKILL || x == SIGSTOP ? -1 : x;
    if (x < 0) return -1;
    tkp_prod.signal = (int)x;
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
    [S_TOKPROF_TIME_NS] = {NUM(tkp_cfg.time_ns, 1)},
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
    [S_TOKPROF_TEST_REP] = {.dst = &tkp_prod.test_rep},
    [S_TOKPROF_TEST_GPU] = {.dst = &tkp_prod.test_gpu},
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
