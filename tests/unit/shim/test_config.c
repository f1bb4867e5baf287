/* The settings table (shim/core/config.c, from include/tokprof/settings.def): README.md's table
 * of variables is this table, row for row; every row has its place in the shim; unset variables
 * get the defaults the table states; a bad value gets the default; TOKPROF_STEP's regex is
 * compiled when the settings are read. */
#include <criterion/criterion.h>
#include <ctype.h>
#include <regex.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"
#include "core/log.h"

static void unset_all(void)
{
    size_t n;
    const struct tkp_setting *t = tkp_settings(&n);
    for (size_t i = 0; i < n; i++)
        unsetenv(t[i].name);
    tkp_log_level = TKP_LOG_QUIET; /* the bad values below need not be shown */
}
TestSuite(shim_config, .init = unset_all);

/* README's row for a setting: | `NAME` | `default` (or unset) | doc | */
static void row(const struct tkp_setting *s, char *out, size_t n)
{
    char def[600];
    if (*s->def) snprintf(def, sizeof def, "`%s`", s->def);
    else snprintf(def, sizeof def, "unset");
    snprintf(out, n, "| `%s` | %s | %s |", s->name, def, s->doc);
}

Test(shim_config, readme_lists_the_table_row_for_row)
{
    FILE *f = fopen(TKP_SOURCE_DIR "/README.md", "r");
    cr_assert_not_null(f);
    size_t n, k = 0;
    const struct tkp_setting *t = tkp_settings(&n);
    char line[4096], want[4096];
    int bad = 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        if (strncmp(line, "| `TOKPROF_", 11)) continue;
        if (k < n) row(&t[k], want, sizeof want);
        if (k >= n || strcmp(line, want)) {
            fprintf(stderr, "README.md row %zu:\n  is   %s\n  want %s\n", k + 1, line,
                    k < n ? want : "(no such setting)");
            bad = 1;
        }
        k++;
    }
    fclose(f);
    if (bad || k != n) {
        fprintf(stderr, "README.md's table should read (include/tokprof/settings.def):\n");
        for (size_t i = 0; i < n; i++) {
            row(&t[i], want, sizeof want);
            fprintf(stderr, "%s\n", want);
        }
    }
    cr_assert(!bad && k == n, "README.md has %zu TOKPROF_ rows, the table %zu (stderr: the diff)",
              k, n);
}

Test(shim_config, every_setting_has_a_parser_and_a_place)
{
    size_t n;
    const struct tkp_setting *t = tkp_settings(&n);
    cr_assert_eq(n, 31);
    for (size_t i = 0; i < n; i++) {
        cr_assert_not_null(t[i].parse, "%s", t[i].name);
        cr_assert(t[i].dst || (t[i].kind == 'c' || t[i].kind == 'C'), "%s has no place",
                  t[i].name);
        if (t[i].kind == 'u' || t[i].kind == 'n')
            cr_assert(t[i].size == 4 || t[i].size == 8, "%s", t[i].name);
        cr_assert(!strncmp(t[i].name, "TOKPROF_", 8));
        cr_assert_eq(tkp_config_set(t[i].name, NULL), 0, "%s: its default parses", t[i].name);
    }
    cr_assert_str_eq(t[0].name, "TOKPROF_LOG", "read first: it governs the others' warnings");
}

/* An alternative of settings.def's VALUES (w, k bytes) with its placeholders filled: good values
 * ({RE} a regex, {N} 2, {M} 3, {I} 1, {F} 1.5) or bad ones ({RE} empty, {N} 00, {M} 1 below
 * {N}, {I} a letter, {F} 0). */
static void fill(const char *w, size_t k, int good, char *out, size_t cap)
{
    static const char *ph[][3] = {{"{RE}", "^x$", ""},  {"{N}", "2", "00"}, {"{M}", "3", "1"},
                                  {"{I}", "1", "x"}, {"{F}", "1.5", "0"}};
    size_t o = 0;
    for (size_t i = 0; i < k && o + 8 < cap;) {
        size_t j = 0;
        while (j < sizeof ph / sizeof ph[0] && strncmp(w + i, ph[j][0], strlen(ph[j][0])))
            j++;
        if (j == sizeof ph / sizeof ph[0]) {
            out[o++] = w[i++];
            continue;
        }
        o += (size_t)snprintf(out + o, cap - o, "%s", ph[j][good ? 1 : 2]);
        i += strlen(ph[j][0]);
    }
    out[o] = 0;
}

/* The parsers take their values from settings.def: every alternative of a 'c' or 'C' setting is
 * accepted (any case for 'C'), and refused with a bad placeholder or a letter more; a value the
 * table gains, loses or reorders shows here (a parser maps the alternatives by their order and
 * refuses everything when their count is not its own). */
Test(shim_config, every_choice_in_the_table_is_what_the_parser_takes)
{
    size_t n, tried = 0;
    const struct tkp_setting *t = tkp_settings(&n);
    for (size_t i = 0; i < n; i++) {
        if (t[i].kind != 'c' && t[i].kind != 'C') continue;
        for (const char *w = t[i].values; *w;) {
            size_t k = strcspn(w, "|");
            char v[128];
            fill(w, k, 1, v, sizeof v);
            cr_assert_eq(tkp_config_set(t[i].name, v), 0, "%s=%s refused", t[i].name, v);
            if (t[i].kind == 'C') {
                for (char *c = v; *c; c++) /* case swapped */
                    *c = (char)(isupper((unsigned char)*c) ? tolower((unsigned char)*c)
                                                            : toupper((unsigned char)*c));
                cr_assert_eq(tkp_config_set(t[i].name, v), 0, "%s=%s refused", t[i].name, v);
            }
            if (memchr(w, '{', k)) {
                fill(w, k, 0, v, sizeof v);
                cr_assert_eq(tkp_config_set(t[i].name, v), -1, "%s=%s taken", t[i].name, v);
            } else {
                fill(w, k, 1, v, sizeof v);
                strcat(v, "q");
                cr_assert_eq(tkp_config_set(t[i].name, v), -1, "%s=%s taken", t[i].name, v);
            }
            tried++;
            w += k + (w[k] == '|');
        }
    }
    cr_assert_geq(tried, 30);
}

/* What each alternative of settings.def sets, written here a second time on purpose: the parsers
 * map the alternatives by their order in settings.def, so two swapped there ("sync|graph") would
 * still be accepted, each meaning the other. Every alternative (filled as fill() fills it) must
 * have its row here and give its value; a row no alternative reaches fails too. */
Test(shim_config, every_choice_in_the_table_means_its_own_value)
{
    struct {
        const char *name, *value;
        const void *field; /* an int, or with wide a uint64_t */
        int wide;
        uint64_t want;
        int seen;
    } rows[] = {
#define INT(name, value, field, want) {name, value, &(field), 0, (uint64_t)(want), 0}
#define U64(name, value, field, want) {name, value, &(field), 1, (uint64_t)(want), 0}
        INT("TOKPROF_LOG", "quiet", tkp_log_level, TKP_LOG_QUIET),
        INT("TOKPROF_LOG", "warn", tkp_log_level, TKP_LOG_WARN),
        INT("TOKPROF_LOG", "debug", tkp_log_level, TKP_LOG_DEBUG),
        INT("TOKPROF_STEP", "auto", tkp_cfg.step_mode, TKP_STEPMODE_AUTO),
        INT("TOKPROF_STEP", "sync", tkp_cfg.step_mode, TKP_STEPMODE_SYNC),
        INT("TOKPROF_STEP", "graph", tkp_cfg.step_mode, TKP_STEPMODE_GRAPH),
        INT("TOKPROF_STEP", "marker", tkp_cfg.step_mode, TKP_STEPMODE_MARKER),
        INT("TOKPROF_STEP", "nvtx:^x$", tkp_cfg.step_mode, TKP_STEPMODE_NVTX),
        INT("TOKPROF_STEP", "kernel:^x$", tkp_cfg.step_mode, TKP_STEPMODE_KERNEL),
        INT("TOKPROF_STACKS", "off", tkp_cfg.stacks_mode, TKP_STACKS_OFF),
        INT("TOKPROF_STACKS", "first:2", tkp_cfg.stacks_mode, TKP_STACKS_FIRST),
        INT("TOKPROF_STACKS", "sample:2", tkp_cfg.stacks_mode, TKP_STACKS_SAMPLE),
        INT("TOKPROF_STACKS_UNWINDER", "auto", tkp_cfg.stacks_unwinder, TKP_UNWINDER_AUTO),
        INT("TOKPROF_STACKS_UNWINDER", "libunwind", tkp_cfg.stacks_unwinder,
            TKP_UNWINDER_LIBUNWIND),
        INT("TOKPROF_STACKS_UNWINDER", "backtrace", tkp_cfg.stacks_unwinder,
            TKP_UNWINDER_BACKTRACE),
        INT("TOKPROF_GPU", "always", tkp_cfg.gpu_mode, TKP_GPUMODE_ALWAYS),
        INT("TOKPROF_GPU", "off", tkp_cfg.gpu_mode, TKP_GPUMODE_OFF),
        INT("TOKPROF_GPU", "trigger", tkp_cfg.gpu_mode, TKP_GPUMODE_TRIGGER),
        INT("TOKPROF_GPU", "window:2/3", tkp_cfg.gpu_mode, TKP_GPUMODE_WINDOW),
        INT("TOKPROF_CLOCK", "auto", tkp_cfg.clock, TKP_CLOCK_AUTO),
        INT("TOKPROF_CLOCK", "tsc", tkp_cfg.clock, TKP_CLOCK_TSC),
        INT("TOKPROF_CLOCK", "monotonic", tkp_cfg.clock, TKP_CLOCK_MONOTONIC),
        INT("TOKPROF_TEST_REP", "on", tkp_prod.test_rep, 0),
        INT("TOKPROF_TEST_REP", "off", tkp_prod.test_rep, 1),
        INT("TOKPROF_TEST_REP", "shadow", tkp_prod.test_rep, 2),
        INT("TOKPROF_TEST_GPU", "on", tkp_prod.test_gpu, 0),
        INT("TOKPROF_TEST_GPU", "off", tkp_prod.test_gpu, 1),
        INT("TOKPROF_TEST_GPU", "shadow", tkp_prod.test_gpu, 2),
        INT("TOKPROF_TEST_GPU", "plain", tkp_prod.test_gpu, 3),
        INT("TOKPROF_MODE", "stream", tkp_prod.flight, 0),
        INT("TOKPROF_MODE", "flight", tkp_prod.flight, 1),
        U64("TOKPROF_TRIGGER", "step>1.5ms", tkp_prod.step_ns, 1500000),
        U64("TOKPROF_TRIGGER", "step>1.5us", tkp_prod.step_ns, 1500),
        U64("TOKPROF_TRIGGER", "step>1.5s", tkp_prod.step_ns, 1500000000),
        INT("TOKPROF_TRIGGER", "step>1.5*p50", tkp_prod.step_trigger, 2),
        INT("TOKPROF_TRIGGER", "step>1.5xp50", tkp_prod.step_trigger, 2),
        INT("TOKPROF_TRIGGER_SIGNAL", "none", tkp_prod.signal, 0),
        INT("TOKPROF_TRIGGER_SIGNAL", "0", tkp_prod.signal, 0),
        INT("TOKPROF_TRIGGER_SIGNAL", "USR1", tkp_prod.signal, SIGUSR1),
        INT("TOKPROF_TRIGGER_SIGNAL", "USR2", tkp_prod.signal, SIGUSR2),
        INT("TOKPROF_TRIGGER_SIGNAL", "HUP", tkp_prod.signal, SIGHUP),
        INT("TOKPROF_TRIGGER_SIGNAL", "PWR", tkp_prod.signal, SIGPWR),
        INT("TOKPROF_TRIGGER_SIGNAL", "RTMIN+1", tkp_prod.signal, SIGRTMIN + 1),
        INT("TOKPROF_TRIGGER_SIGNAL", "SIGUSR1", tkp_prod.signal, SIGUSR1),
        INT("TOKPROF_TRIGGER_SIGNAL", "SIGUSR2", tkp_prod.signal, SIGUSR2),
        INT("TOKPROF_TRIGGER_SIGNAL", "SIGHUP", tkp_prod.signal, SIGHUP),
        INT("TOKPROF_TRIGGER_SIGNAL", "SIGPWR", tkp_prod.signal, SIGPWR),
        INT("TOKPROF_TRIGGER_SIGNAL", "SIGRTMIN+1", tkp_prod.signal, SIGRTMIN + 1),
        INT("TOKPROF_TRIGGER_SIGNAL", "2", tkp_prod.signal, 2),
#undef INT
#undef U64
    };
    size_t nrows = sizeof rows / sizeof rows[0], n;
    const struct tkp_setting *t = tkp_settings(&n);
    for (size_t i = 0; i < n; i++) {
        if (t[i].kind != 'c' && t[i].kind != 'C') continue;
        for (const char *w = t[i].values; *w;) {
            size_t k = strcspn(w, "|"), r = 0;
            char v[128];
            fill(w, k, 1, v, sizeof v);
            while (r < nrows && (strcmp(rows[r].name, t[i].name) || strcmp(rows[r].value, v)))
                r++;
            cr_assert_lt(r, nrows, "%s=%s: no row says what it sets", t[i].name, v);
            cr_assert_eq(tkp_config_set(t[i].name, v), 0, "%s=%s refused", t[i].name, v);
            uint64_t got = rows[r].wide ? *(const uint64_t *)rows[r].field
                                        : (uint64_t)*(const int *)rows[r].field;
            cr_assert_eq(got, rows[r].want, "%s=%s sets %llu, not %llu", t[i].name, v,
                         (unsigned long long)got, (unsigned long long)rows[r].want);
            rows[r].seen = 1;
            w += k + (w[k] == '|');
        }
    }
    for (size_t r = 0; r < nrows; r++)
        cr_assert(rows[r].seen, "%s=%s is no alternative of settings.def", rows[r].name,
                  rows[r].value);
}

Test(shim_config, unset_variables_get_the_tables_defaults)
{
    unsetenv("TOKPROF_GPU"); /* ctest's environment sets always (tests/test_env.cmake.in) */
    setenv("TOKPROF_BUFFER_MB", "", 1); /* set but empty: unset */
    tkp_config_load();
    cr_assert_eq(tkp_cfg.disabled, 0);
    cr_assert_str_eq(tkp_cfg.out_dir, ".");
    cr_assert_eq(tkp_cfg.step_mode, TKP_STEPMODE_AUTO);
    cr_assert_eq(tkp_cfg.buffer_mb, 64);
    cr_assert_eq(tkp_cfg.ring_kb, 1024);
    cr_assert_eq(tkp_cfg.flush_ms, 200);
    cr_assert_eq(tkp_cfg.step_copy_max, 4u << 20);
    cr_assert_eq(tkp_cfg.stacks_mode, TKP_STACKS_OFF);
    cr_assert_eq(tkp_cfg.gpu_mode, TKP_GPUMODE_WINDOW); /* window:2/20: docs/OPERATIONS.md */
    cr_assert_eq(tkp_cfg.gpu_win_n, 2);
    cr_assert_eq(tkp_cfg.gpu_win_m, 20);
    cr_assert_eq(tkp_cfg.gpu_trigger_steps, 10);
    cr_assert_eq(tkp_cfg.gpu_buffer_mb, 32);
    cr_assert_str_eq(tkp_cfg.cupti_path, "libcupti.so.13");
    cr_assert_eq(tkp_cfg.clock, TKP_CLOCK_AUTO);
    cr_assert_eq(tkp_cfg.time_ns, 1); /* exact host times unless asked */
    cr_assert_eq(tkp_prod.flight, 0);
    cr_assert_eq(tkp_prod.max_bytes, (uint64_t)TKP_DEFAULT_MAX_MB << 20);
    cr_assert_eq(tkp_prod.keep, TKP_DEFAULT_KEEP);
    cr_assert_eq(tkp_prod.before_ns, 10000000000ull);
    cr_assert_eq(tkp_prod.after_ns, 2000000000ull);
    cr_assert_eq(tkp_prod.step_trigger, 0);
    cr_assert_eq(tkp_prod.signal, SIGUSR2);
    cr_assert_str_eq(tkp_prod.trigger_file, "");
    cr_assert_eq(tkp_log_level, TKP_LOG_WARN);
}

Test(shim_config, values_are_parsed_once_at_load)
{
    setenv("TOKPROF_STEP", "kernel:^step_begin$", 1);
    setenv("TOKPROF_GPU", "window:2/5", 1);
    setenv("TOKPROF_STACKS", "sample:7", 1);
    setenv("TOKPROF_STACKS_UNWINDER", "backtrace", 1);
    setenv("TOKPROF_CLOCK", "monotonic", 1);
    setenv("TOKPROF_MODE", "flight", 1);
    setenv("TOKPROF_FLIGHT_MB", "0.5", 1);
    setenv("TOKPROF_TRIGGER", "step>3*p50", 1);
    setenv("TOKPROF_TRIGGER_SIGNAL", "RTMIN+2", 1);
    setenv("TOKPROF_DISABLE", "0", 1);
    tkp_config_load();
    unset_all();
    cr_assert_eq(tkp_cfg.step_mode, TKP_STEPMODE_KERNEL);
    cr_assert_str_eq(tkp_cfg.step_regex, "^step_begin$");
    cr_assert_eq(regexec(&tkp_cfg.step_re, "step_begin", 0, NULL, 0), 0, "compiled at load");
    cr_assert_neq(regexec(&tkp_cfg.step_re, "step_begin2", 0, NULL, 0), 0);
    cr_assert_eq(tkp_cfg.gpu_mode, TKP_GPUMODE_WINDOW);
    cr_assert_eq(tkp_cfg.gpu_win_n, 2);
    cr_assert_eq(tkp_cfg.gpu_win_m, 5);
    cr_assert_eq(tkp_cfg.stacks_mode, TKP_STACKS_SAMPLE);
    cr_assert_eq(tkp_cfg.stacks_every, 7);
    cr_assert_eq(tkp_cfg.stacks_unwinder, TKP_UNWINDER_BACKTRACE);
    cr_assert_eq(tkp_cfg.clock, TKP_CLOCK_MONOTONIC);
    cr_assert_eq(tkp_prod.flight, 1);
    cr_assert_eq(tkp_prod.flight_bytes, 524288);
    cr_assert_eq(tkp_prod.step_trigger, 2);
    cr_assert_float_eq(tkp_prod.step_factor, 3.0, 1e-9);
    cr_assert_eq(tkp_prod.signal, SIGRTMIN + 2);
    cr_assert_eq(tkp_cfg.disabled, 0);
    /* a fork child reads them again: the old regex is freed, the new one compiled */
    setenv("TOKPROF_STEP", "nvtx:^decode", 1);
    tkp_config_load();
    cr_assert_eq(tkp_cfg.step_mode, TKP_STEPMODE_NVTX);
    cr_assert_eq(regexec(&tkp_cfg.step_re, "decode_step", 0, NULL, 0), 0);
}

Test(shim_config, a_bad_value_gets_the_default)
{
    cr_assert_eq(tkp_config_set("TOKPROF_BUFFER_MB", "-3"), -1);
    cr_assert_eq(tkp_cfg.buffer_mb, 64);
    cr_assert_eq(tkp_config_set("TOKPROF_STEP", "kernel:(unclosed"), -1, "a regex that fails");
    cr_assert_eq(tkp_cfg.step_mode, TKP_STEPMODE_AUTO);
    cr_assert_eq(tkp_config_set("TOKPROF_STEP", "nvtx:"), -1);
    cr_assert_eq(tkp_config_set("TOKPROF_GPU", "window:5/2"), -1);
    cr_assert_eq(tkp_cfg.gpu_mode, TKP_GPUMODE_WINDOW, "the default, window:2/20");
    cr_assert_eq(tkp_cfg.gpu_win_n, 2);
    cr_assert_eq(tkp_cfg.gpu_win_m, 20);
    cr_assert_eq(tkp_config_set("TOKPROF_TRIGGER_SIGNAL", "KILL"), -1);
    cr_assert_eq(tkp_prod.signal, SIGUSR2);
    cr_assert_eq(tkp_config_set("TOKPROF_CLOCK", "tsc"), 0);
    cr_assert_eq(tkp_cfg.clock, TKP_CLOCK_TSC);
    cr_assert_eq(tkp_config_set("TOKPROF_NOT_A_SETTING", "1"), -2);
}
