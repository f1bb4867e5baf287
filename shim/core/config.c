/* TOKPROF_* environment variables, read once at start. A bad value never stops the program: it
 * gets one warning line and the default. README.md documents each variable.
 *
 * Secure execution. A setuid or setgid program, or one with file capabilities, runs with more
 * privilege than the user who set its environment: glibc marks it AT_SECURE and ignores
 * LD_LIBRARY_PATH and most of LD_PRELOAD, but a shim installed in /etc/ld.so.preload still
 * loads. There the environment is the attacker's input (TOKPROF_OUT names where a privileged
 * process writes, TOKPROF_CUPTI_PATH what it dlopens), so such a process records nothing:
 * tkp_start_slow() asks tkp_secure_exec() before it reads any variable, and every variable is read
 * through tkp_env(), secure_getenv(3), which answers NULL there anyway. LTTng-UST reads its
 * variables once into a table and refuses the dangerous ones (clock and getcpu plugin paths, HOME)
 * in a setuid process, judged by euid != uid or egid != gid; we ask the kernel's AT_SECURE
 * instead, which also covers file capabilities, and refuse every variable: none of ours is
 * harmless enough to allow (even TOKPROF_LOG would let the caller write into a privileged
 * process's stderr). */
#include <errno.h>
#include <stdlib.h>
#include <sys/auxv.h>
#include <string.h>
#include <strings.h>

#include "core/config.h"
#include "core/log.h"

struct tkp_config tkp_cfg;

int tkp_secure_exec(void)
{
    return getauxval(AT_SECURE) != 0;
}

const char *tkp_env(const char *name)
{
    return secure_getenv(name);
}

static unsigned parse_uint(const char *var, unsigned def, unsigned lo, unsigned hi)
{
    const char *v = tkp_env(var);
    if (!v || !*v) return def;
    char *end;
    errno = 0;
    unsigned long x = strtoul(v, &end, 10);
    if (errno || *end || x < lo || x > hi) {
        tkp_warn("%s=%s is not a number in [%u, %u]; using %u", var, v, lo, hi, def);
        return def;
    }
    return (unsigned)x;
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

void tkp_config_load(void)
{
    if (!tkp_cfg.program[0]) tkp_config_note_program(); /* a start without the constructor */
    const char *v = tkp_env("TOKPROF_LOG");
    if (v && *v) {
        if (!strcasecmp(v, "quiet")) tkp_log_level = TKP_LOG_QUIET;
        else if (!strcasecmp(v, "warn")) tkp_log_level = TKP_LOG_WARN;
        else if (!strcasecmp(v, "debug")) tkp_log_level = TKP_LOG_DEBUG;
        else tkp_warn("TOKPROF_LOG=%s is not quiet|warn|debug; using warn", v);
    }
    v = tkp_env("TOKPROF_DISABLE");
    tkp_cfg.disabled = v && *v && strcmp(v, "0") != 0;

    v = tkp_env("TOKPROF_OUT");
    copy_str(tkp_cfg.out_dir, sizeof tkp_cfg.out_dir, v && *v ? v : ".");

    tkp_cfg.step_mode = TKP_STEPMODE_AUTO;
    tkp_cfg.step_regex[0] = 0;
    v = tkp_env("TOKPROF_STEP");
    if (v && *v) {
        if (!strcmp(v, "auto")) tkp_cfg.step_mode = TKP_STEPMODE_AUTO;
        else if (!strcmp(v, "sync")) tkp_cfg.step_mode = TKP_STEPMODE_SYNC;
        else if (!strcmp(v, "graph")) tkp_cfg.step_mode = TKP_STEPMODE_GRAPH;
        else if (!strcmp(v, "marker")) tkp_cfg.step_mode = TKP_STEPMODE_MARKER;
        else if (!strncmp(v, "nvtx:", 5) && v[5]) {
            tkp_cfg.step_mode = TKP_STEPMODE_NVTX;
            copy_str(tkp_cfg.step_regex, sizeof tkp_cfg.step_regex, v + 5);
        } else if (!strncmp(v, "kernel:", 7) && v[7]) {
            tkp_cfg.step_mode = TKP_STEPMODE_KERNEL;
            copy_str(tkp_cfg.step_regex, sizeof tkp_cfg.step_regex, v + 7);
        } else
            tkp_warn("TOKPROF_STEP=%s is not auto|sync|graph|marker|nvtx:RE|kernel:RE; using auto", v);
    }
    tkp_cfg.buffer_mb = parse_uint("TOKPROF_BUFFER_MB", 64, 1, 65536);
    tkp_cfg.ring_kb = parse_uint("TOKPROF_RING_KB", 1024, 4, 1048576);
    tkp_cfg.flush_ms = parse_uint("TOKPROF_FLUSH_MS", 200, 1, 600000);
    tkp_cfg.step_copy_max = parse_uint("TOKPROF_STEP_COPY_MAX", 4u << 20, 1, 1u << 30);
}
