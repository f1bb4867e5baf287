/* simgpu cost model and fault knobs. README.md ("Cost model") states the formulas; truth.py
 * re-implements them independently, so any change here must be made there too.
 *
 * All arithmetic is IEEE double, rounded once with floor(x + 0.5), so that Python computes the
 * same integers from the same constants. */
#include <math.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

struct family {
    char name[32];
    char pattern[192];
    regex_t re;
    double base_ns, per_block_ns;
};

#define MAX_FAMILIES 64
static struct family fam[MAX_FAMILIES];
static int nfam;

/* Constants (bandwidths in bytes/ns == GB/s, peak in FLOP/ns). */
static struct {
    double latency_ns, copy_base_ns, memset_base_ns;
    double pinned_bw, pageable_bw, dtod_bw, hbm_bw, peak_flops;
} C = {
    .latency_ns = 2000,
    .copy_base_ns = 1500,
    .memset_base_ns = 1000,
    .pinned_bw = 50,      /* PCIe 5 x16, pinned */
    .pageable_bw = 20,    /* pageable host memory: staged copies */
    .dtod_bw = 2400,      /* read + write of HBM at 4.8 TB/s */
    .hbm_bw = 4800,       /* H200 HBM3e */
    .peak_flops = 989000, /* 989 TFLOP/s dense bf16 */
};

/* Default families: first match wins (POSIX ERE, case-insensitive), on the (mangled) name. */
static const struct {
    const char *name, *pattern;
    double base, per_block;
} default_families[] = {
    {"attention", "attn|attention|flash|fmha|sdpa", 6000, 40},
    {"moe", "moe|expert|router", 5000, 20},
    {"gemm", "gemm|gemv|matmul|cublas|cutlass|mma", 4000, 25},
    {"norm", "norm", 1500, 4},
    {"rope", "rope|rotary", 1200, 3},
    {"kvcache", "kv_?cache|kvcache|paged|cache", 1500, 4},
    {"embedding", "embed", 1500, 3},
    {"sampling", "sampl|argmax|topk|top_k|softmax|logits", 2500, 10},
    {"activation", "silu|gelu|relu|swiglu|activation|act_", 1000, 2},
    {"copy", "copy|memcpy|cast|convert|fill|transpose", 1000, 1},
    {"other", ".*", 2000, 5},
};

/* Faults. */
static int zero;
static int jitter_on;
static uint64_t jitter_state;
static double jitter_pct;
static char slow_name[128];
static long slow_from;
static double slow_factor;
static long slow_count;
static char stall_name[128] = "embed";
static long stall_k;
static simtime_t stall_ns;
static long stall_count;

int sim_zero(void) { return zero; }

static int add_family(const char *name, const char *pattern, double base, double per_block)
{
    if (nfam >= MAX_FAMILIES)
        return -1;
    struct family *f = &fam[nfam];
    snprintf(f->name, sizeof f->name, "%s", name);
    snprintf(f->pattern, sizeof f->pattern, "%s", pattern);
    if (regcomp(&f->re, pattern, REG_EXTENDED | REG_ICASE | REG_NOSUB) != 0) {
        fprintf(stderr, "simgpu: bad cost regex '%s'\n", pattern);
        return -1;
    }
    f->base_ns = base;
    f->per_block_ns = per_block;
    nfam++;
    return 0;
}

static void set_const(const char *key, double v)
{
    static const struct {
        const char *key;
        double *p;
    } keys[] = {
        {"latency_ns", &C.latency_ns},   {"copy_base_ns", &C.copy_base_ns},
        {"memset_base_ns", &C.memset_base_ns}, {"pinned_bw", &C.pinned_bw},
        {"pageable_bw", &C.pageable_bw}, {"dtod_bw", &C.dtod_bw},
        {"hbm_bw", &C.hbm_bw},           {"peak_flops", &C.peak_flops},
    };
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        if (!strcmp(keys[i].key, key)) {
            *keys[i].p = v;
            return;
        }
    fprintf(stderr, "simgpu: unknown cost constant '%s'\n", key);
}

/* SIMGPU_COST file: "NAME REGEX BASE_NS PER_BLOCK_NS" lines add families that are tried, in
 * file order, BEFORE the default families (first match wins, so they override the defaults for
 * the names they match); "set KEY VALUE" lines change a constant; '#' starts a comment. */
static void load_cost_file(const char *path)
{
    FILE *fp = fopen(path, "r");
    if (!fp) {
        fprintf(stderr, "simgpu: cannot open SIMGPU_COST=%s; using defaults\n", path);
        return;
    }
    char line[512];
    while (fgets(line, sizeof line, fp)) {
        char *hash = strchr(line, '#');
        if (hash)
            *hash = 0;
        char a[64], b[192], c[64];
        double x, y;
        if (sscanf(line, "set %63s %lf", a, &x) == 2)
            set_const(a, x);
        else if (sscanf(line, "%63s %191s %lf %lf", a, b, &x, &y) == 4)
            add_family(a, b, x, y);
        else if (sscanf(line, " %63s", c) == 1)
            fprintf(stderr, "simgpu: ignoring cost line: %s", line);
    }
    fclose(fp);
}

static simtime_t api_ns;

void cost_init(void)
{
    const char *e = getenv("SIMGPU_COST");
    if (e && *e)
        load_cost_file(e);
    for (size_t i = 0; i < sizeof default_families / sizeof default_families[0]; i++)
        add_family(default_families[i].name, default_families[i].pattern, default_families[i].base,
                   default_families[i].per_block);
    e = getenv("SIMGPU_ZERO");
    zero = e && *e && strcmp(e, "0") != 0;
    e = getenv("SIMGPU_JITTER");
    if (e && *e) {
        unsigned long long seed;
        if (sscanf(e, "%llu:%lf", &seed, &jitter_pct) == 2) {
            jitter_on = 1;
            jitter_state = seed;
        } else {
            fprintf(stderr, "simgpu: bad SIMGPU_JITTER=%s (want SEED:PCT)\n", e);
        }
    }
    e = getenv("SIMGPU_SLOW");
    if (e && *e) {
        if (sscanf(e, "%127[^:]:%ld:%lf", slow_name, &slow_from, &slow_factor) != 3) {
            fprintf(stderr, "simgpu: bad SIMGPU_SLOW=%s (want NAME:FROM_N:FACTOR)\n", e);
            slow_name[0] = 0;
        }
    }
    e = getenv("SIMGPU_API_NS");
    if (e && *e) {
        char *end;
        long long ns = strtoll(e, &end, 10);
        if (*end || ns < 0 || ns > 1000000000)
            fprintf(stderr, "simgpu: bad SIMGPU_API_NS=%s (want NS, 0 to 1e9)\n", e);
        else
            api_ns = ns;
    }
    e = getenv("SIMGPU_STALL");
    if (e && *e) {
        long long ns = 0;
        int n = sscanf(e, "%ld:%lld:%127s", &stall_k, &ns, stall_name);
        if (n < 2 || stall_k <= 0) {
            fprintf(stderr, "simgpu: bad SIMGPU_STALL=%s (want K:NS[:NAME])\n", e);
            stall_k = 0;
        }
        stall_ns = ns;
    }
}

simtime_t cost_api_ns(void)
{
    sim_ensure_init();
    return zero ? 0 : api_ns;
}

simtime_t cost_latency(void) { return zero ? 0 : (simtime_t)C.latency_ns; }

static simtime_t round_ns(double x) { return x <= 0 ? 0 : (simtime_t)floor(x + 0.5); }

static int classify(const char *name)
{
    for (int i = 0; i < nfam; i++)
        if (regexec(&fam[i].re, name, 0, NULL, 0) == 0)
            return i;
    return -1;
}

/* splitmix64: tiny, seedable, and easy to reproduce in Python. */
static uint64_t splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

simtime_t cost_kernel(struct sim_func *f, const unsigned grid[3], const struct simgpu_launch_info *li,
                      simtime_t *stall, int *faulted)
{
    *stall = 0;
    *faulted = 0;
    const char *name = f->name;
    if (f->family < 0)
        f->family = classify(name);
    double d;
    double base = f->family >= 0 ? fam[f->family].base_ns : 2000;
    double per_block = f->family >= 0 ? fam[f->family].per_block_ns : 5;
    if (li && (li->flops > 0 || li->bytes > 0)) {
        double tc = li->flops / C.peak_flops, tm = li->bytes / C.hbm_bw;
        d = base + (tc > tm ? tc : tm);
    } else {
        double blocks = (double)grid[0] * (double)grid[1] * (double)grid[2];
        d = base + per_block * blocks;
    }
    simtime_t ns = round_ns(d);
    if (slow_name[0] && strstr(name, slow_name)) {
        if (slow_count++ >= slow_from) {
            ns = round_ns((double)ns * slow_factor);
            *faulted = 1;
        }
    }
    if (jitter_on) {
        /* u uniform in [-1, 1): 53 random bits */
        double u = (double)(splitmix64(&jitter_state) >> 11) / 9007199254740992.0 * 2.0 - 1.0;
        ns = round_ns((double)ns * (1.0 + u * jitter_pct / 100.0));
        *faulted = 1;
    }
    if (stall_k > 0 && strstr(name, stall_name)) {
        if (++stall_count % stall_k == 0)
            *stall = zero ? 0 : stall_ns;
    }
    return zero ? 0 : ns;
}

simtime_t cost_copy(size_t bytes, int dir, int pinned)
{
    if (zero)
        return 0;
    double bw;
    if (dir == DIR_DTOD)
        bw = C.dtod_bw;
    else
        bw = pinned ? C.pinned_bw : C.pageable_bw;
    return round_ns(C.copy_base_ns + (double)bytes / bw);
}

simtime_t cost_memset(size_t bytes)
{
    return zero ? 0 : round_ns(C.memset_base_ns + (double)bytes / C.hbm_bw);
}
