/* SIMGPU_WRITES: named kernels with a host-visible effect on an output buffer (README.md,
 * "Kernel writes"). No device code runs on simgpu, so a program that copies a kernel's result back
 * and decides on it (vLLM's Model Runner V2 reads how many tokens each request sampled) would read
 * whatever the memory held. A rule says what such a kernel writes:
 *
 *     SIMGPU_WRITES=NAME:PARAM:TYPE:VALUE[:COUNT][,NAME:PARAM:TYPE:VALUE[:COUNT]...]
 *
 * a kernel whose name contains NAME writes COUNT elements of TYPE (i8 i16 i32 i64 f32 f64), all
 * VALUE, at the device pointer its PARAM-th parameter holds (0-based index into kernelParams);
 * COUNT defaults to the launch's grid x (one element per program, as a Triton kernel indexed by
 * program_id(0) writes). The bytes are written when the kernel executes (a launch at its call, a
 * graph node at each replay), like copies. A destination outside every allocation the driver knows,
 * or a launch without kernelParams, writes nothing and says so on stderr once per rule. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

#define MAX_RULES 8

struct rule {
    char name[128];
    unsigned param, elemsize;
    unsigned char value[8]; /* little-endian bytes of VALUE in TYPE */
    size_t count;           /* 0 = the grid's x */
    int warned;
};

static struct rule rules[MAX_RULES];
static int nrules;

static int parse_value(const char *type, const char *v, struct rule *r)
{
    char *end;
    if (!strcmp(type, "f32") || !strcmp(type, "f64")) {
        double d = strtod(v, &end);
        if (end == v || *end)
            return -1;
        float f = (float)d;
        r->elemsize = type[1] == '3' ? 4 : 8;
        memcpy(r->value, r->elemsize == 4 ? (void *)&f : (void *)&d, r->elemsize);
        return 0;
    }
    static const struct { const char *t; unsigned size; } ints[] = {{"i8", 1}, {"i16", 2}, {"i32", 4}, {"i64", 8}};
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
        if (!strcmp(type, ints[i].t)) {
            long long x = strtoll(v, &end, 0);
            if (end == v || *end)
                return -1;
            r->elemsize = ints[i].size;
            memcpy(r->value, &x, r->elemsize); /* little-endian: the low bytes */
            return 0;
        }
    return -1;
}

static int parse_rule(char *s, struct rule *r)
{
    char *f[5] = {0};
    int n = 0;
    for (char *p = s; p; n++) { /* split at every ':'; a sixth field is an error */
        if (n == 5)
            return -1;
        f[n] = p;
        p = strchr(p, ':');
        if (p)
            *p++ = 0;
    }
    if (n < 4 || !*f[0] || strlen(f[0]) >= sizeof r->name)
        return -1;
    char *end;
    unsigned long param = strtoul(f[1], &end, 10);
    if (end == f[1] || *end || param > 63)
        return -1;
    memset(r, 0, sizeof *r);
    strcpy(r->name, f[0]);
    r->param = (unsigned)param;
    if (parse_value(f[2], f[3], r))
        return -1;
    if (n == 5) {
        unsigned long long c = strtoull(f[4], &end, 10);
        if (end == f[4] || *end || !c)
            return -1;
        r->count = (size_t)c;
    }
    return 0;
}

void writes_init(void)
{
    const char *e = getenv("SIMGPU_WRITES");
    if (!e || !*e)
        return;
    char *copy = strdup(e), *save = NULL;
    if (!copy)
        return;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (nrules == MAX_RULES || parse_rule(tok, &rules[nrules])) {
            fprintf(stderr, "simgpu: bad SIMGPU_WRITES=%s (want NAME:PARAM:TYPE:VALUE[:COUNT], "
                            "TYPE i8|i16|i32|i64|f32|f64, at most %d rules): none applied\n", e, MAX_RULES);
            nrules = 0;
            break;
        }
        nrules++;
    }
    free(copy);
}

int writes_resolve(const char *kernel, void **params, const unsigned grid[3], struct sim_write *out)
{
    int n = 0;
    for (int i = 0; i < nrules && n < SIM_MAX_WRITES; i++) {
        struct rule *r = &rules[i];
        if (!strstr(kernel, r->name))
            continue;
        size_t count = r->count ? r->count : grid[0];
        void *dst = NULL;
        if (params && params[r->param])
            memcpy(&dst, params[r->param], sizeof dst);
        if (!dst || !mem_fits(dst, count * r->elemsize)) {
            if (!r->warned)
                fprintf(stderr, "simgpu: SIMGPU_WRITES rule %s:%u: %s's parameter is not %zu bytes of "
                                "known memory: not written\n", r->name, r->param, kernel, count * r->elemsize);
            r->warned = 1;
            continue;
        }
        out[n].dst = dst;
        out[n].count = count;
        out[n].elemsize = r->elemsize;
        memcpy(out[n].value, r->value, sizeof out[n].value);
        n++;
    }
    return n;
}

void writes_apply(const struct sim_write *w, int n)
{
    for (int i = 0; i < n; i++) {
        unsigned char *d = w[i].dst;
        for (size_t k = 0; k < w[i].count; k++)
            memcpy(d + k * w[i].elemsize, w[i].value, w[i].elemsize);
    }
}
