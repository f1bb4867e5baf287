/* The production settings: TOKPROF_MODE, the stream files' budget, the flight recorder's window
 * and its triggers. A bad value never stops the program: one warning line and the default. */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/config.h"
#include "core/log.h"
#include "sink/prod.h"

struct tkp_prod_config tkp_prod;

/* A positive decimal number (MB and seconds may be fractional: "0.25"); def when unset or bad. */
static double parse_num(const char *var, double def, double lo, double hi)
{
    const char *v = tkp_env(var);
    if (!v || !*v) return def;
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (errno || *end || !(x >= lo && x <= hi)) {
        tkp_warn("%s=%s is not a number in [%g, %g]; using %g", var, v, lo, hi, def);
        return def;
    }
    return x;
}

static int parse_signal(const char *v)
{
    if (!strcasecmp(v, "none") || !strcmp(v, "0")) return 0;
    if (!strncasecmp(v, "SIG", 3)) v += 3;
    if (!strcasecmp(v, "USR1")) return SIGUSR1;
    if (!strcasecmp(v, "USR2")) return SIGUSR2;
    if (!strcasecmp(v, "HUP")) return SIGHUP;
    if (!strcasecmp(v, "PWR")) return SIGPWR;
    if (!strncasecmp(v, "RTMIN+", 6)) {
        char *end;
        long n = strtol(v + 6, &end, 10);
        if (!*end && n >= 0 && SIGRTMIN + n <= SIGRTMAX) return SIGRTMIN + (int)n;
        return -1;
    }
    char *end;
    long n = strtol(v, &end, 10);
    if (*v && !*end && n > 0 && n < NSIG && n != SIGKILL && n != SIGSTOP) return (int)n;
    return -1;
}

/* "step>40ms", "step>0.5s", "step>3*p50" (also "3xp50"). */
static int parse_step_trigger(const char *v)
{
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

void tkp_prod_config_load(void)
{
    memset(&tkp_prod, 0, sizeof tkp_prod);
    const char *v = tkp_env("TOKPROF_MODE");
    if (v && *v) {
        if (!strcmp(v, "flight")) tkp_prod.flight = 1;
        else if (strcmp(v, "stream"))
            tkp_warn("TOKPROF_MODE=%s is not stream|flight; using stream", v);
    }
    /* Bounded by default (docs/OPERATIONS.md, "Disk"): 256 MB files, the newest 4 kept, so
     * one process never holds more than about 1 GiB; 0 lifts either bound. */
    tkp_prod.max_bytes = (uint64_t)(parse_num("TOKPROF_MAX_MB", TKP_DEFAULT_MAX_MB, 0, 1 << 24) *
                                    1048576.0);
    tkp_prod.keep = (unsigned)parse_num("TOKPROF_KEEP", TKP_DEFAULT_KEEP, 0, 65535);
    tkp_prod.min_free_bytes =
        (uint64_t)(parse_num("TOKPROF_MIN_FREE_MB", TKP_DEFAULT_MIN_FREE_MB, 0, 1 << 30) *
                   1048576.0);
    tkp_prod.min_free_pct =
        (unsigned)parse_num("TOKPROF_MIN_FREE_PCT", TKP_DEFAULT_MIN_FREE_PCT, 0, 100);
    tkp_prod.flight_bytes =
        (uint64_t)(parse_num("TOKPROF_FLIGHT_MB", 64, 0.01, 1 << 16) * 1048576.0);
    tkp_prod.before_ns = (uint64_t)(parse_num("TOKPROF_FLIGHT_BEFORE_S", 10, 0, 86400) * 1e9);
    tkp_prod.after_ns = (uint64_t)(parse_num("TOKPROF_FLIGHT_AFTER_S", 2, 0, 86400) * 1e9);
    tkp_prod.min_gap_ns = (uint64_t)(parse_num("TOKPROF_TRIGGER_MIN_S", 60, 0, 86400 * 365) * 1e9);
    tkp_prod.test_delay_ms = (unsigned)parse_num("TOKPROF_TEST_WRITER_DELAY_MS", 0, 0, 600000);
    v = tkp_env("TOKPROF_TRIGGER");
    if (v && *v && parse_step_trigger(v)) {
        tkp_prod.step_trigger = 0;
        tkp_warn("TOKPROF_TRIGGER=%s is not step>Nms|step>Ns|step>F*p50; no step trigger", v);
    }
    tkp_prod.signal = SIGUSR2;
    v = tkp_env("TOKPROF_TRIGGER_SIGNAL");
    if (v && *v) {
        int s = parse_signal(v);
        if (s < 0) tkp_warn("TOKPROF_TRIGGER_SIGNAL=%s is not a signal (USR1, USR2, RTMIN+N, a "
                            "number, none); using USR2", v);
        else tkp_prod.signal = s;
    }
    v = tkp_env("TOKPROF_TRIGGER_FILE");
    if (v && *v && strlen(v) < sizeof tkp_prod.trigger_file) strcpy(tkp_prod.trigger_file, v);
    else if (v && *v) tkp_warn("TOKPROF_TRIGGER_FILE is longer than %zu bytes; no file trigger",
                               sizeof tkp_prod.trigger_file - 1);
}
