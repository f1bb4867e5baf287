/* tokprof doctor: what a capture on this host will do, before it runs.
 *
 * The shim never stops its host and never prints on stdout: everything that goes wrong in a
 * capture (an output directory it refuses, a missing CUPTI, a bad TOKPROF_* value, the disk floor)
 * is one warning line on the program's stderr, often lost in a service's logs, and a capture that
 * is silently thinner than asked. This command asks the same questions beforehand, from the same
 * rules where the shim's can be shared (include/tokprof/outdir.h: who may own TOKPROF_OUT and the
 * free-space floor; include/tokprof/settings.def: every TOKPROF_* variable, its default and the
 * values the shim accepts), and by doing what the shim will do (dlopen the driver, the runtime and
 * CUPTI; preload the shim into /bin/true) where they cannot.
 *
 * Levels: "ok"; "info" (worth knowing, changes nothing); "warn" (the capture works, thinner or
 * bounded in a way to know about); "problem" (the capture will not work as the settings ask: no
 * file, no GPU time, a setting ignored). Exit 0 without problems, 1 with them. */
#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <gnu/libc-version.h>
#include <limits.h>
#include <link.h>
#include <regex.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "base/err.h"
#include "base/elfinfo.h"
#include "base/json.h"
#include "cmd/cmd.h"
#include "cmd/doctor.h"
#include "tokprof/outdir.h"

extern char **environ;

/* ---- the shim's settings (include/tokprof/settings.def) -------------------------------------- */

struct setting {
    const char *name;
    char kind;
    const char *def;
    double lo, hi;
    const char *values;
};
static const struct setting settings[] = {
#define TKP_SETTING(name, kind, def, lo, hi, values, doc) {#name, kind, def, lo, hi, values},
#include "tokprof/settings.def"
#undef TKP_SETTING
};
#define NSETTINGS (sizeof settings / sizeof *settings)

/* Matches v against one choice of a 'c' setting, placeholders included (settings.def). 1 when it
 * matches; 0 when not, with a reason in why when the shape matched but a part is wrong. */
static int match_choice(const char *c, const char *cend, const char *v, int icase, char *why,
                        size_t cap)
{
    unsigned long nums[2] = {0, 0};
    int nnums = 0;
    while (c < cend) {
        if (*c != '{') {
            if (!*v ||
                (icase ? tolower((unsigned char)*c) != tolower((unsigned char)*v) : *c != *v))
                return 0;
            c++, v++;
            continue;
        }
        const char *close = memchr(c, '}', (size_t)(cend - c));
        if (!close) return 0;
        size_t n = (size_t)(close - c - 1);
        c = close + 1;
        if (n == 2 && !strncmp(close - 2, "RE", 2)) { /* the rest of the value */
            if (!*v) return 0;
            regex_t re;
            int rc = regcomp(&re, v, REG_EXTENDED | REG_NOSUB); /* shim/record/step.c's flags */
            if (rc) {
                char msg[128];
                regerror(rc, &re, msg, sizeof msg);
                snprintf(why, cap,
                         "'%.48s' is not a regular expression (%.48s): it matches nothing", v, msg);
                return 0;
            }
            regfree(&re);
            v += strlen(v);
        } else if (n == 1 && close[-1] == 'F') {
            char *end;
            double x = strtod(v, &end);
            if (end == v || !(x > 0)) return 0;
            v = end;
        } else { /* N, M, I: whole numbers */
            if (*v < '0' || *v > '9') return 0;
            char *end;
            unsigned long x = strtoul(v, &end, 10);
            if (close[-1] != 'I' && x < 1) return 0;
            if (nnums < 2) nums[nnums++] = x;
            v = end;
        }
    }
    if (*v) return 0;
    if (nnums == 2 && nums[0] > nums[1]) {
        snprintf(why, cap, "%lu/%lu: the first number must not exceed the second", nums[0],
                 nums[1]);
        return 0;
    }
    return 1;
}

/* NULL when value v is one the shim accepts for s, else why not (in buf). */
static const char *setting_refusal(const struct setting *s, const char *v, char *buf, size_t cap)
{
    char *end;
    errno = 0;
    switch (s->kind) {
    case 'u': {
        unsigned long long x = strtoull(v, &end, 10);
        if (*v < '0' || *v > '9' || *end || errno || (double)x < s->lo || (double)x > s->hi)
            snprintf(buf, cap, "not a whole number in [%.0f, %.0f]", s->lo, s->hi);
        else
            return NULL;
        return buf;
    }
    case 'n': {
        double x = strtod(v, &end);
        if (end == v || *end || errno || !(x >= s->lo && x <= s->hi))
            snprintf(buf, cap, "not a number in [%g, %g]", s->lo, s->hi);
        else
            return NULL;
        return buf;
    }
    case 'c':
    case 'C': {
        buf[0] = 0;
        for (const char *c = s->values; *c;) {
            const char *bar = strchr(c, '|');
            const char *cend = bar ? bar : c + strlen(c);
            if (match_choice(c, cend, v, s->kind == 'C', buf, cap)) return NULL;
            if (buf[0]) return buf;
            c = bar ? bar + 1 : cend;
        }
        snprintf(buf, cap, "not one of %s", s->values);
        return buf;
    }
    default: /* 's', 'b': any value */
        return NULL;
    }
}

/* ---- findings and the report ----------------------------------------------------------------- */

enum { OK, INFO, WARN, PROBLEM };
static const char *const level_names[] = {"ok", "info", "warn", "problem"};

#define NFIND 48
struct doc {
    struct tkp_ctx *ctx;
    const struct tkp_doctor_opts *o;
    struct {
        const char *check;
        int level;
        char text[640];
    } f[NFIND];
    size_t n;
    unsigned problems;
    /* each setting as the shim will see it: the value in effect and where it comes from */
    const char *value[NSETTINGS];
    const char *source[NSETTINGS]; /* "env", "default", "tokprof run -o", ... */
    const char *bad[NSETTINGS];    /* why the given value is refused (NULL: accepted) */
    char badbuf[NSETTINGS][256];
    char shim[PATH_MAX];
    int have_shim;
};

static void note(struct doc *d, const char *check, int level, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void note(struct doc *d, const char *check, int level, const char *fmt, ...)
{
    if (d->n == NFIND) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(d->f[d->n].text, sizeof d->f[d->n].text, fmt, ap);
    va_end(ap);
    d->f[d->n].check = check;
    d->f[d->n].level = level;
    d->n++;
    if (level == PROBLEM) d->problems++;
}

static size_t setting_index(const char *name)
{
    for (size_t i = 0; i < NSETTINGS; i++)
        if (!strcmp(settings[i].name, name)) return i;
    return 0; /* names below are all in settings.def: tested by e2e_doctor_settings_table */
}

/* The value the shim will use for a setting (the default when the given one is bad). */
static const char *val(struct doc *d, const char *name)
{
    return d->value[setting_index(name)];
}

static double num(struct doc *d, const char *name)
{
    return strtod(val(d, name), NULL);
}

static void load_settings(struct doc *d)
{
    for (size_t i = 0; i < NSETTINGS; i++) {
        const struct setting *s = &settings[i];
        const char *v = getenv(s->name), *src = "env";
        if (!strcmp(s->name, "TOKPROF_OUT") && d->o->out_dir)
            v = d->o->out_dir, src = "tokprof run -o";
        if (!strcmp(s->name, "TOKPROF_STEP") && d->o->step)
            v = d->o->step, src = "tokprof run --step";
        d->value[i] = s->def;
        d->source[i] = "default";
        d->bad[i] = NULL;
        if (!v || !*v) continue; /* the shim takes an empty value for unset */
        d->bad[i] = setting_refusal(s, v, d->badbuf[i], sizeof d->badbuf[i]);
        if (d->bad[i]) {
            note(d, "settings", PROBLEM, "%s=%s is %s; the shim warns and uses %s", s->name, v,
                 d->bad[i], *s->def ? s->def : "none");
            d->source[i] = "default (the given value is refused)";
            continue;
        }
        d->value[i] = v;
        d->source[i] = src;
    }
    if (strcmp(val(d, "TOKPROF_DISABLE"), "") && strcmp(val(d, "TOKPROF_DISABLE"), "0"))
        note(d, "settings", PROBLEM, "TOKPROF_DISABLE=%s: the shim records nothing",
             val(d, "TOKPROF_DISABLE"));
    /* a TOKPROF_ name the shim does not read is most often a typo of one it does */
    for (char **e = environ; *e; e++) {
        if (strncmp(*e, "TOKPROF_", 8)) continue;
        size_t n = strcspn(*e, "=");
        int known = !strncmp(*e, "TOKPROF_SHIM=", 13) || !strncmp(*e, "TOKPROF_TEST_", 13);
        for (size_t i = 0; i < NSETTINGS && !known; i++)
            known = strlen(settings[i].name) == n && !strncmp(*e, settings[i].name, n);
        if (!known)
            note(d, "settings", WARN, "%.*s is not a variable the shim reads (a typo?)", (int)n,
                 *e);
    }
}

/* Preloads the shim into /bin/true, as ld.so will into the program: the loader's own word on
 * whether it loads (a missing symbol version, a wrong architecture). NULL when it loaded, else
 * the loader's line in buf. TOKPROF_DISABLE=1: the shim does nothing there. */
static const char *trial_preload(const char *shim, char *buf, size_t cap)
{
    int pfd[2];
    if (pipe2(pfd, O_CLOEXEC)) return NULL; /* cannot tell: the other checks speak */
    size_t n = 0;
    for (char **e = environ; *e; e++)
        n++;
    char **env = calloc(n + 3, sizeof *env);
    char pre[PATH_MAX + 16];
    snprintf(pre, sizeof pre, "LD_PRELOAD=%s", shim);
    if (!env) return NULL;
    size_t k = 0;
    for (char **e = environ; *e; e++)
        if (strncmp(*e, "LD_PRELOAD=", 11) && strncmp(*e, "TOKPROF_DISABLE=", 16)) env[k++] = *e;
    env[k++] = pre;
    env[k++] = "TOKPROF_DISABLE=1";
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, pfd[1], 2);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    char *argv[] = {"true", NULL};
    pid_t pid;
    int rc = posix_spawn(&pid, "/bin/true", &fa, NULL, argv, env);
    posix_spawn_file_actions_destroy(&fa);
    free(env);
    close(pfd[1]);
    const char *why = NULL;
    if (!rc) {
        size_t got = 0;
        ssize_t r;
        while (got + 1 < cap && (r = read(pfd[0], buf + got, cap - 1 - got)) > 0)
            got += (size_t)r;
        buf[got] = 0;
        int status;
        waitpid(pid, &status, 0);
        char *nl = strchr(buf, '\n');
        if (nl) *nl = 0;
        if (strstr(buf, "cannot be preloaded") || strstr(buf, "ld.so") || !WIFEXITED(status) ||
            WEXITSTATUS(status))
            why = buf[0] ? buf : "/bin/true failed with the shim preloaded";
    }
    close(pfd[0]);
    return why;
}

static void check_shim(struct doc *d)
{
    const char *given = d->o->shim && *d->o->shim ? d->o->shim : NULL;
    if (tkp_doctor_find_shim(d->ctx, given, d->shim, sizeof d->shim)) {
        note(d, "shim", PROBLEM, "%s", d->ctx->why);
        d->ctx->why[0] = 0;
        return;
    }
    d->have_shim = 1;
    struct tkp_elf e, self;
    if (tkp_elf_read(d->shim, &e) || !e.bits) {
        note(d, "shim", PROBLEM, "%s: not an ELF shared object (%s)", d->shim,
             e.bits ? strerror(errno) : "no ELF header");
        return;
    }
    if (tkp_elf_read("/proc/self/exe", &self) || !self.bits) self = e; /* cannot tell */
    if (e.bits != self.bits || e.machine != self.machine) {
        note(d, "shim", PROBLEM, "%s: %s %s, this host runs %s %s programs: it cannot load",
             d->shim, e.bits == 64 ? "64-bit" : "32-bit", tkp_elf_machine_name(e.machine),
             self.bits == 64 ? "64-bit" : "32-bit", tkp_elf_machine_name(self.machine));
        return;
    }
    const char *have = gnu_get_libc_version();
    if (e.glibc > tkp_elf_glibc_num(have)) {
        note(d, "shim", PROBLEM,
             "%s needs glibc %u.%u (%s), this host has %s: it cannot load (a release build, "
             "docs/RELEASE.md, needs 2.28)",
             d->shim, e.glibc / 1000, e.glibc % 1000, e.glibc_name, have);
        return;
    }
    char buf[512];
    const char *why = trial_preload(d->shim, buf, sizeof buf);
    if (why) {
        note(d, "shim", PROBLEM, "%s does not preload: %s", d->shim, why);
        return;
    }
    note(d, "shim", OK,
         "%s: 64-bit %s like this host; needs glibc %u.%u (%s), this host has %s; "
         "preloads into /bin/true",
         d->shim, tkp_elf_machine_name(e.machine), e.glibc / 1000, e.glibc % 1000,
         e.glibc_name[0] ? e.glibc_name : "none", have);
}

/* ---- CUDA: driver, runtime, CUPTI ------------------------------------------------------------ */

/* Where the loader found library h (opened as `name`), as a real path. */
static const char *lib_path(void *h, const char *name)
{
    static char buf[4][PATH_MAX];
    static unsigned k;
    struct link_map *lm = NULL;
    if (dlinfo(h, RTLD_DI_LINKMAP, &lm) || !lm || !lm->l_name || !*lm->l_name) return name;
    char *out = buf[k++ % 4];
    return realpath(lm->l_name, out) ? out : lm->l_name;
}

static void dir_of(const char *path, char *out, size_t cap)
{
    snprintf(out, cap, "%s", path);
    char *s = strrchr(out, '/');
    if (s)
        *s = 0;
    else
        snprintf(out, cap, ".");
}

/* The directory of simgpu's fake driver, "" when the driver is a real one: the fake runtime and
 * CUPTI beside it are simgpu's too. */
static char simgpu_dir[PATH_MAX];

static void check_driver(struct doc *d)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        note(d, "driver", PROBLEM,
             "libcuda.so.1 not found (%s): no CUDA driver on the library path, the program "
             "cannot use a GPU and there is nothing to capture",
             dlerror());
        return;
    }
    const char *path = lib_path(h, "libcuda.so.1");
    int (*get_version)(int *) = (int (*)(int *))dlsym(h, "cuDriverGetVersion");
    int (*init)(unsigned) = (int (*)(unsigned))dlsym(h, "cuInit");
    int (*count)(int *) = (int (*)(int *))dlsym(h, "cuDeviceGetCount");
    int (*name)(char *, int, int) = (int (*)(char *, int, int))dlsym(h, "cuDeviceGetName");
    int sim = dlsym(h, "simgpuGetProcTable") != NULL;
    if (sim) dir_of(path, simgpu_dir, sizeof simgpu_dir);
    int v = 0;
    if (!get_version || !init || get_version(&v)) {
        note(d, "driver", PROBLEM, "%s: not a CUDA driver (no cuDriverGetVersion or cuInit)", path);
        return;
    }
    char what[160] = "";
    int rc = init(0), n = 0;
    if (!rc && count && !count(&n) && n > 0) {
        char dev[96] = "?";
        if (name) name(dev, sizeof dev, 0);
        snprintf(what, sizeof what, "%d device%s (%s%s)", n, n == 1 ? "" : "s", dev,
                 n > 1 ? ", ..." : "");
    }
    if (!what[0]) {
        note(d, "driver", WARN,
             "%s: CUDA %d.%d driver, but cuInit says %d (no usable GPU): the program will find "
             "none; tier 1 records its CUDA calls, tier 2 has no GPU to time",
             path, v / 1000, v % 1000 / 10, rc);
        return;
    }
    note(d, "driver", OK, "%s: CUDA %d.%d driver, %s%s", path, v / 1000, v % 1000 / 10, what,
         sim ? "; this is simgpu, the simulated GPU (tests/simgpu), not NVIDIA's driver" : "");
}

static int beside_simgpu(const char *path)
{
    char dir[PATH_MAX];
    dir_of(path, dir, sizeof dir);
    return simgpu_dir[0] && !strcmp(dir, simgpu_dir);
}

static void check_runtime(struct doc *d)
{
    static const char *const names[] = {"libcudart.so.13", "libcudart.so.12"};
    for (size_t i = 0; i < 2; i++) {
        void *h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (!h) continue;
        const char *path = lib_path(h, names[i]);
        int (*get_version)(int *) = (int (*)(int *))dlsym(h, "cudaRuntimeGetVersion");
        int v = 0;
        if (!get_version || get_version(&v)) {
            note(d, "runtime", WARN, "%s: no answer from cudaRuntimeGetVersion", path);
            return;
        }
        note(d, "runtime", OK, "%s: CUDA runtime %d.%d%s", path, v / 1000, v % 1000 / 10,
             beside_simgpu(path) ? " (simgpu's, beside its driver)" : "");
        return;
    }
    note(d, "runtime", INFO,
         "no libcudart.so.13 or .12 on the library path: fine when the program brings its own "
         "(PyTorch wheels do, in nvidia/cuda_runtime) or links it statically; the shim hooks both");
}

static void check_cupti(struct doc *d)
{
    const char *mode = val(d, "TOKPROF_GPU");
    if (!strcmp(mode, "off")) {
        note(d, "cupti", INFO, "tier 2 (GPU time) off: TOKPROF_GPU=off");
        return;
    }
    const char *given = getenv("TOKPROF_CUPTI_PATH");
    const char *name = given && *given ? given : "libcupti.so.13";
    void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        /* a program may load its own CUPTI (torch's nvidia/cuda_cupti); a named path is the
         * user's explicit request, and it fails */
        note(d, "cupti", given && *given ? PROBLEM : WARN,
             "%s cannot be loaded (%s): tier 2 (GPU time) off%s", name, dlerror(),
             given && *given ? " although TOKPROF_GPU asks for it"
                             : ", unless the program loads its own libcupti.so.13 first");
        return;
    }
    const char *path = lib_path(h, name);
    static const char *const need[] = {"cuptiSubscribe",
                                       "cuptiEnableCallback",
                                       "cuptiActivityRegisterCallbacks",
                                       "cuptiActivityRegisterTimestampCallback",
                                       "cuptiActivityEnable",
                                       "cuptiActivityDisable",
                                       "cuptiActivityGetNextRecord",
                                       "cuptiActivityFlushAll"};
    for (size_t i = 0; i < sizeof need / sizeof *need; i++)
        if (!dlsym(h, need[i])) {
            note(d, "cupti", PROBLEM, "%s lacks %s (the activity API): tier 2 (GPU time) off", path,
                 need[i]);
            return;
        }
    int (*get_version)(uint32_t *) = (int (*)(uint32_t *))dlsym(h, "cuptiGetVersion");
    uint32_t v = 0;
    if (get_version) get_version(&v);
    note(d, "cupti", OK, "%s: CUPTI API version %u%s; tier 2 (GPU time) on: TOKPROF_GPU=%s", path,
         v, beside_simgpu(path) ? " (simgpu's, beside its driver)" : "", mode);
}

/* The names of the environment variables starting with prefix, ", "-separated, into buf (cap >=
 * 64 bytes; cut short when long). Returns how many there are. */
static unsigned env_names(const char *prefix, char *buf, size_t cap)
{
    size_t len = 0, plen = strlen(prefix);
    unsigned n = 0;
    buf[0] = 0;
    for (char **e = environ; *e; e++)
        if (!strncmp(*e, prefix, plen) && ++n && len < cap - 64)
            len += (size_t)snprintf(buf + len, cap - len, "%s%.*s", len ? ", " : "",
                                    (int)strcspn(*e, "="), *e);
    return n;
}

/* nsys and torch.profiler take CUPTI's one subscriber (CUDA <= 13.2; DESIGN.md, "Capture"): the
 * shim's tier 2 then fails soft with one warning. */
static void check_cupti_users(struct doc *d)
{
    int gpu = strcmp(val(d, "TOKPROF_GPU"), "off") != 0, found = 0;
    const char *inj = getenv("CUDA_INJECTION64_PATH");
    if (inj && *inj) {
        note(d, "cupti-users", gpu ? PROBLEM : INFO,
             "CUDA_INJECTION64_PATH=%s: another tool (Nsight Systems sets it) injects into CUDA "
             "and takes CUPTI; tier 2 (GPU time) %s",
             inj, gpu ? "will be off" : "is off anyway");
        found = 1;
    }
    char names[256];
    if (env_names("NSYS_", names, sizeof names)) {
        note(d, "cupti-users", gpu ? PROBLEM : INFO,
             "%s: this runs under Nsight Systems, which holds CUPTI; tier 2 (GPU time) %s", names,
             gpu ? "will be off" : "is off anyway");
        found = 1;
    }
    if (env_names("KINETO_", names, sizeof names)) {
        note(d, "cupti-users", gpu ? WARN : INFO,
             "%s: torch.profiler (Kineto) is set up; while it profiles it holds CUPTI, and if it "
             "starts first the shim's tier 2 is off for the whole run",
             names);
        found = 1;
    }
    if (!found)
        note(d, "cupti-users", OK,
             "no other CUPTI user in the environment (CUDA_INJECTION64_PATH, NSYS_*, KINETO_* "
             "unset); a torch.profiler the program starts itself still takes CUPTI");
}

static void check_nvtx(struct doc *d)
{
    const char *v = getenv("NVTX_INJECTION64_PATH");
    int nvtx_steps = !strncmp(val(d, "TOKPROF_STEP"), "nvtx:", 5);
    char real[PATH_MAX];
    int ours = v && *v && d->have_shim && realpath(v, real) && !strcmp(real, d->shim);
    if (ours) {
        note(d, "nvtx", OK, "NVTX_INJECTION64_PATH names the shim: NVTX ranges are recorded");
    } else if (v && *v) {
        note(d, "nvtx", nvtx_steps ? PROBLEM : WARN,
             "NVTX_INJECTION64_PATH=%s, not the shim: NVTX ranges go there, not to tokprof%s", v,
             nvtx_steps ? ", and TOKPROF_STEP=nvtx:... will find no step" : "");
    } else if (d->o->run) {
        note(d, "nvtx", OK,
             "tokprof run sets NVTX_INJECTION64_PATH to the shim: NVTX ranges are "
             "recorded");
    } else {
        note(d, "nvtx", nvtx_steps ? PROBLEM : INFO,
             "NVTX_INJECTION64_PATH unset: NVTX ranges are not recorded%s (set it to the shim's "
             "path; tokprof run does)",
             nvtx_steps ? ", and TOKPROF_STEP=nvtx:... will find no step" : "");
    }
}

/* ---- TOKPROF_OUT and the disk ---------------------------------------------------------------- */

static void check_out(struct doc *d)
{
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", val(d, "TOKPROF_OUT"));
    for (size_t n = strlen(dir); n > 1 && dir[n - 1] == '/'; n--)
        dir[n - 1] = 0;
    /* tokprof run hands the shim the real path of -o: a link there is resolved, not refused */
    char real[PATH_MAX];
    if (d->o->run && d->o->out_dir && realpath(dir, real)) snprintf(dir, sizeof dir, "%s", real);
    struct stat st;
    char buf[128], space_of[PATH_MAX];
    snprintf(space_of, sizeof space_of, "%s", dir);
    uid_t me = geteuid();
    if (lstat(dir, &st)) {
        if (errno != ENOENT) {
            note(d, "out", PROBLEM, "TOKPROF_OUT %s: %s; capture off", dir, strerror(errno));
            return;
        }
        dir_of(dir, space_of, sizeof space_of);
        if (access(space_of, W_OK | X_OK)) {
            note(d, "out", PROBLEM,
                 "TOKPROF_OUT %s is missing and %s cannot be written (%s): "
                 "the shim cannot create it; capture off",
                 dir, space_of, strerror(errno));
            return;
        }
        if (d->o->run) { /* tokprof run makes it with mkdir(0777) and the umask */
            mode_t um = umask(0);
            umask(um);
            st.st_mode = S_IFDIR | (0777 & ~um);
            st.st_uid = me;
            const char *why = tkp_outdir_refusal(&st, me, buf, sizeof buf);
            if (why) {
                note(d, "out", PROBLEM,
                     "%s: tokprof run would create it with mode 0%o (umask "
                     "0%o): %s, which the shim refuses",
                     dir, (unsigned)(st.st_mode & 07777), (unsigned)um, why);
                return;
            }
        }
        note(d, "out", OK, "TOKPROF_OUT %s does not exist yet: %s creates it (yours, mode %s)", dir,
             d->o->run ? "tokprof run" : "the shim", d->o->run ? "0777 less the umask" : "0700");
    } else if (S_ISLNK(st.st_mode)) {
        note(d, "out", PROBLEM,
             "TOKPROF_OUT %s is a symbolic link: the shim refuses it "
             "(docs/SECURITY.md); capture off. Name the directory itself",
             dir);
        return;
    } else {
        const char *why = tkp_outdir_refusal(&st, me, buf, sizeof buf);
        if (why) {
            note(d, "out", PROBLEM,
                 "TOKPROF_OUT %s (uid %u, mode 0%o) is refused by the shim: %s "
                 "(docs/SECURITY.md); capture off",
                 dir, (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777), why);
            return;
        }
        if (faccessat(AT_FDCWD, dir, W_OK | X_OK, AT_EACCESS)) {
            note(d, "out", PROBLEM, "TOKPROF_OUT %s: uid %u cannot write it (%s); capture off", dir,
                 (unsigned)me, strerror(errno));
            return;
        }
        char *abs = realpath(dir, real);
        note(d, "out", OK, "TOKPROF_OUT %s%s%s%s: a directory of uid %u, mode 0%o%s", dir,
             abs && strcmp(abs, dir) ? " (" : "", abs && strcmp(abs, dir) ? abs : "",
             abs && strcmp(abs, dir) ? ")" : "", (unsigned)st.st_uid,
             (unsigned)(st.st_mode & 07777), st.st_mode & S_ISVTX ? " (sticky)" : "");
    }

    if (dir[0] != '/' && !d->o->run)
        note(d, "out", INFO,
             "TOKPROF_OUT %s is relative: judged from this directory, the shim "
             "opens it from the program's working directory at its first CUDA call",
             dir);
    struct statvfs sv;
    if (statvfs(space_of, &sv)) {
        note(d, "disk", WARN, "%s: cannot tell its free space (%s)", space_of, strerror(errno));
        return;
    }
    uint64_t unit = sv.f_frsize ? sv.f_frsize : sv.f_bsize ? sv.f_bsize : 4096;
    uint64_t avail = (uint64_t)sv.f_bavail * unit, total = (uint64_t)sv.f_blocks * unit;
    uint64_t floor = tkp_outdir_floor(total, (uint64_t)(num(d, "TOKPROF_MIN_FREE_MB") * 1048576.0),
                                      (unsigned)num(d, "TOKPROF_MIN_FREE_PCT"));
    const double mb = 1048576.0;
    if (avail <= floor) {
        note(d, "disk", PROBLEM,
             "%s: %.0f MB free, under the floor of %.0f MB (TOKPROF_MIN_FREE_MB"
             "=%s, TOKPROF_MIN_FREE_PCT=%s of %.0f MB): the shim writes nothing",
             space_of, avail / mb, floor / mb, val(d, "TOKPROF_MIN_FREE_MB"),
             val(d, "TOKPROF_MIN_FREE_PCT"), total / mb);
        return;
    }
    double room = (double)(avail - floor) / mb;
    double max = num(d, "TOKPROF_MAX_MB"), keep = (double)(unsigned)num(d, "TOKPROF_KEEP");
    int flight = !strcmp(val(d, "TOKPROF_MODE"), "flight");
    double each = flight ? num(d, "TOKPROF_FLIGHT_MB") : max;
    const char *what =
        flight ? "snapshots of up to about TOKPROF_FLIGHT_MB" : "files of TOKPROF_MAX_MB";
    char budget[160];
    if (!keep || (!flight && !max)) {
        snprintf(budget, sizeof budget,
                 "no bound per process (%s=0): a process writes until "
                 "the floor",
                 !keep ? "TOKPROF_KEEP" : "TOKPROF_MAX_MB");
        note(d, "disk", WARN, "%s: %.0f MB free, floor %.0f MB, %.0f MB above it; %s", space_of,
             avail / mb, floor / mb, room, budget);
        return;
    }
    note(d, "disk", each * keep > room ? WARN : OK,
         "%s: %.0f MB free, floor %.0f MB, %.0f MB above it; each process keeps at most %.0f MB "
         "(%s=%g x TOKPROF_KEEP=%g)%s",
         space_of, avail / mb, floor / mb, room, each * keep, what, each, keep,
         each * keep > room ? ": more than the room, a long capture stops at the floor" : "");
}

/* ---- the program (tokprof run --check -- PROG) ----------------------------------------------- */

static int find_prog(const char *name, char *out, size_t cap)
{
    if (strchr(name, '/')) {
        snprintf(out, cap, "%s", name);
        return access(out, X_OK);
    }
    const char *path = getenv("PATH");
    for (const char *p = path ? path : "/usr/bin:/bin"; *p;) {
        size_t n = strcspn(p, ":");
        snprintf(out, cap, "%.*s/%s", (int)n, n ? p : ".", name);
        if (!access(out, X_OK)) return 0;
        p += n + (p[n] == ':');
    }
    return -1;
}

static void check_prog(struct doc *d)
{
    if (!d->o->prog) {
        note(d, "secure", INFO,
             "no program given: `tokprof run --check -- PROGRAM` also checks "
             "it (setuid, capabilities, static linking)");
        return;
    }
    const char *name = d->o->prog[0];
    char path[PATH_MAX];
    if (find_prog(name, path, sizeof path)) {
        note(d, "program", PROBLEM, "%s: not found or not executable", name);
        return;
    }
    struct stat st;
    if (stat(path, &st)) {
        note(d, "program", PROBLEM, "%s: %s", path, strerror(errno));
        return;
    }
    /* AT_SECURE (DESIGN.md, shim/core/config.c): glibc ignores LD_PRELOAD for them, and a shim
     * that still loads (/etc/ld.so.preload) reads no variable and records nothing */
    int secure = 0;
    if (st.st_mode & S_ISUID) {
        note(d, "secure", PROBLEM,
             "%s is setuid (uid %u): it runs AT_SECURE, the shim records "
             "nothing",
             path, (unsigned)st.st_uid);
        secure = 1;
    }
    if ((st.st_mode & S_ISGID) && (st.st_mode & S_IXGRP)) {
        note(d, "secure", PROBLEM, "%s is setgid: it runs AT_SECURE, the shim records nothing",
             path);
        secure = 1;
    }
    if (getxattr(path, "security.capability", NULL, 0) > 0) {
        note(d, "secure", PROBLEM,
             "%s has file capabilities (getcap): it runs AT_SECURE, the "
             "shim records nothing",
             path);
        secure = 1;
    }
    if (!secure)
        note(d, "secure", OK, "%s: not setuid, setgid or with file capabilities (no AT_SECURE)",
             path);
    struct tkp_elf e;
    if (tkp_elf_read(path, &e) || !e.bits) {
        note(d, "program", INFO,
             "%s is not an ELF program (a script?): what its interpreter "
             "runs is what the shim sees",
             path);
        return;
    }
    if (!e.interp)
        note(d, "program", PROBLEM,
             "%s is statically linked: no dynamic loader, so LD_PRELOAD "
             "cannot load the shim",
             path);
}

/* ---- the report ------------------------------------------------------------------------------ */

static void report_text(struct doc *d, FILE *f)
{
    fprintf(f, "tokprof doctor: what a capture on this host will do\n\n");
    for (size_t i = 0; i < d->n; i++)
        fprintf(f, "  %-8s %-12s %s\n", level_names[d->f[i].level], d->f[i].check, d->f[i].text);
    fprintf(f, "\nsettings (the shim reads TOKPROF_* once, at the program's first CUDA call):\n");
    for (size_t i = 0; i < NSETTINGS; i++) {
        const char *v = d->value[i];
        fprintf(f, "  %-28s %-16s %s\n", settings[i].name, *v ? v : "(none)", d->source[i]);
    }
    fprintf(f, "\n");
    if (!d->problems) {
        fprintf(f, "a capture will work as set\n");
        return;
    }
    fprintf(f, "%u problem%s: a capture will not work as set\n", d->problems,
            d->problems == 1 ? "" : "s");
    for (size_t i = 0; i < d->n; i++)
        if (d->f[i].level == PROBLEM) fprintf(f, "problem: %s: %s\n", d->f[i].check, d->f[i].text);
}

static void report_json(struct doc *d, FILE *f)
{
    fprintf(f, "{\"ok\":%s,\"problems\":%u,\"checks\":[", d->problems ? "false" : "true",
            d->problems);
    for (size_t i = 0; i < d->n; i++) {
        fprintf(f, "%s{\"check\":", i ? "," : "");
        tkp_json_str(f, d->f[i].check);
        fprintf(f, ",\"level\":\"%s\",\"text\":", level_names[d->f[i].level]);
        tkp_json_str(f, d->f[i].text);
        fputc('}', f);
    }
    fprintf(f, "],\"settings\":[");
    for (size_t i = 0; i < NSETTINGS; i++) {
        fprintf(f, "%s{\"name\":", i ? "," : "");
        tkp_json_str(f, settings[i].name);
        fprintf(f, ",\"value\":");
        tkp_json_str(f, d->value[i]);
        fprintf(f, ",\"source\":");
        tkp_json_str(f, d->source[i]);
        fprintf(f, ",\"refused\":");
        tkp_json_str(f, d->bad[i]);
        fputc('}', f);
    }
    fprintf(f, "]}\n");
}

int tkp_doctor(struct tkp_ctx *ctx, const struct tkp_doctor_opts *o)
{
    struct doc *d = calloc(1, sizeof *d);
    if (!d) return tkp_cmd_fail(ctx, TKP_ERR_NOMEM, "out of memory");
    d->ctx = ctx;
    d->o = o;
    load_settings(d);
    check_shim(d);
    check_driver(d);
    check_runtime(d);
    check_cupti(d);
    check_out(d);
    check_prog(d);
    check_cupti_users(d);
    check_nvtx(d);
    if (o->json)
        report_json(d, ctx->out);
    else
        report_text(d, ctx->out);
    unsigned problems = d->problems;
    free(d);
    if (!problems) return 0;
    return tkp_cmd_fail(ctx, TKP_ERR_VIOLATION, "%u problem%s: a capture will not work as set",
                        problems, problems == 1 ? "" : "s");
}

/* ---- finding the shim (tokprof run uses it too) ---------------------------------------------- */

int tkp_doctor_find_shim(struct tkp_ctx *ctx, const char *given, char *out, size_t outlen)
{
    char exe[PATH_MAX], cand[2][PATH_MAX + 32];
    if (given) {
        if (!realpath(given, out) || access(out, R_OK))
            return tkp_cmd_fail(ctx, TKP_ERR_NOSHIM, "cannot use shim '%s': %s", given,
                                strerror(errno));
        return 0;
    }
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n <= 0)
        return tkp_cmd_fail(ctx, TKP_ERR_NOSHIM,
                            "cannot find libtokprof.so (/proc/self/exe: "
                            "%s); name it with --shim PATH or TOKPROF_SHIM",
                            strerror(errno));
    exe[n] = 0;
    char *slash = strrchr(exe, '/');
    *slash = 0;
    snprintf(cand[0], sizeof(cand[0]), "%s/../shim/libtokprof.so", exe);
    snprintf(cand[1], sizeof(cand[1]), "%s/../lib/libtokprof.so", exe);
    for (int i = 0; i < 2; i++)
        if (realpath(cand[i], out) && !access(out, R_OK) && strlen(out) < outlen) return 0;
    return tkp_cmd_fail(ctx, TKP_ERR_NOSHIM,
                        "cannot find libtokprof.so (looked for %s and %s); "
                        "name it with --shim PATH or TOKPROF_SHIM",
                        cand[0], cand[1]);
}

static int run(int argc, char **argv, struct tkp_ctx *ctx)
{
    struct tkp_doctor_opts o = {.shim = getenv("TOKPROF_SHIM")};
    const struct tkp_opt opts[] = {{"--json", 'f', &o.json, 0, NULL, NULL},
                                   {"--shim", 's', &o.shim, 0, NULL, NULL}};
    const char *args[1];
    size_t nargs;
    int err = tkp_cmd_parse_args(ctx, argc, argv, opts, 2, args, 1, &nargs);
    if (err) return err;
    if (nargs) /* after the options are read: a bad option or --help is named first */
        return tkp_cmd_fail(ctx, TKP_ERR_USAGE,
                            "doctor takes no argument ('%s'); to check a "
                            "program too: tokprof run --check -- PROGRAM",
                            args[0]);
    return tkp_doctor(ctx, &o);
}

const struct tkp_cmd tkp_cmd_doctor = {
    .name = "doctor",
    .brief = "say what a capture on this host will do, before running one",
    .usage =
        "usage: tokprof doctor [--json] [--shim PATH]\n"
        "       tokprof run --check [-o DIR] [--step MODE] [--] [COMMAND [ARGS...]]\n"
        "\n"
        "The shim never stops a program and never prints on stdout: whatever keeps it from\n"
        "capturing is one warning line in the program's stderr, and a capture thinner than asked\n"
        "(or none). doctor asks the same questions first, in this environment, and says what\n"
        "will happen. Each line is ok, info, warn (works, but know this) or problem (the\n"
        "capture will not work as set). `tokprof run --check` judges the run it would start\n"
        "instead of starting it: its -o and --step, and COMMAND itself.\n"
        "\n"
        "  shim         the libtokprof.so to preload: 64-bit and this host's architecture, the\n"
        "               glibc symbol versions it needs (GLIBC_x.y) against this host's glibc,\n"
        "               and ld.so's own word: it is preloaded into /bin/true\n"
        "  driver       libcuda.so.1 found (dlopen) and its version (cuDriverGetVersion), a GPU\n"
        "               (cuInit, cuDeviceGetName); says so when it is simgpu's fake driver\n"
        "  runtime      libcudart.so.13/.12 and its version (cudaRuntimeGetVersion), if any\n"
        "  cupti        CUPTI (TOKPROF_CUPTI_PATH, default libcupti.so.13) loadable with the\n"
        "               activity API: tier 2, the GPU start/end of every kernel, on or off\n"
        "  out          TOKPROF_OUT as the shim judges it: not a symbolic link, yours (or root's\n"
        "               with the sticky bit, like /tmp), not writable by others without the\n"
        "               sticky bit, writable; missing: who creates it, with which mode\n"
        "  disk         free space against the floor (TOKPROF_MIN_FREE_MB, _PCT), and what one\n"
        "               process may keep (TOKPROF_MAX_MB x TOKPROF_KEEP; flight: _FLIGHT_MB x "
        "KEEP)\n"
        "  secure       COMMAND setuid, setgid or with file capabilities: AT_SECURE, the shim\n"
        "               records nothing; a statically linked COMMAND cannot preload it\n"
        "  cupti-users  nsys (CUDA_INJECTION64_PATH, NSYS_*) or torch.profiler (KINETO_*) hold\n"
        "               CUPTI's one subscriber: tier 2 off\n"
        "  nvtx         NVTX_INJECTION64_PATH names the shim (NVTX ranges, TOKPROF_STEP=nvtx:RE)\n"
        "  settings     every TOKPROF_* variable, its value in effect and where it comes from\n"
        "               (env, default, tokprof run); a value the shim would refuse; a TOKPROF_*\n"
        "               name it does not read (a typo)\n"
        "\n"
        "  --json       one JSON object: ok, problems, checks [{check, level, text}], settings\n"
        "               [{name, value, source, refused}]\n"
        "  --shim PATH  judge this libtokprof.so (default: TOKPROF_SHIM, else the one next to\n"
        "               this tokprof)\n"
        "\n"
        "Exit status: 0 a capture will work as set, 1 problems (one 'problem:' line each at the\n"
        "end), 2 usage.\n"
        "\n"
        "example:\n"
        "  TOKPROF_OUT=/var/lib/tokprof tokprof doctor\n"
        "  tokprof run --check -o /tmp/caps -- python -m vllm.entrypoints.openai.api_server\n",
    .run = run,
};
