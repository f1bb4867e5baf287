/* tokprof stacks: where launches come from. The sampled host call stacks of a capture
 * (TOKPROF_STACKS), symbolised offline (symbolize.h), counted per kernel or class, with the GPU
 * time of the sampled launches when the capture has GPU records; as text, JSON, folded stacks or
 * an SVG flame graph (flame.h).
 *
 * One pass; memory is O(distinct stacks + distinct (group, stack) pairs + sampled launches still
 * waiting for their GPU record), never O(launches). A sampled launch is remembered by
 * (thread, step, index) — the GPU join key of docs/FORMAT.md — until its GPU_KERNEL arrives. */
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "model/classes.h"
#include "cmd/cmd.h"
#include "base/hash.h"
#include "base/err.h"
#include "base/grow.h"
#include "views/flame.h"
#include "base/json.h"
#include "base/map.h"
#include "capture/multireader.h"
#include "capture/reader.h"
#include "model/symbolize.h"
#include "base/sort.h"

#define MAX_STACKS (1u << 20)

/* ---- a small map: (k1, k2) -> uint32 ------------------------------------------------------- */

struct map {
    uint64_t *k1, *k2;
    uint32_t *v;
    size_t cap, n;     /* entries in order added */
    struct tkp_map ix; /* by (k1, k2) */
};

struct key2 {
    uint64_t a, b;
};

static int eq_key2(const void *ctx, uint32_t id, const void *key)
{
    const struct map *m = ctx;
    const struct key2 *k = key;
    return m->k1[id] == k->a && m->k2[id] == k->b;
}

static int map_get(const struct map *m, uint64_t a, uint64_t b, uint32_t *v)
{
    struct key2 k = {a, b};
    int64_t id = tkp_map_find(&m->ix, tkp_hash_pair(a, b), eq_key2, m, &k);
    if (id < 0) return 0;
    *v = m->v[id];
    return 1;
}

static int map_put(struct map *m, uint64_t a, uint64_t b, uint32_t v)
{
    struct key2 k = {a, b};
    uint64_t h = tkp_hash_pair(a, b);
    if (tkp_map_reserve(&m->ix, m->n + 1)) return TKP_ERR_NOMEM;
    struct tkp_map_slot *ms = tkp_map_probe(&m->ix, h, eq_key2, m, &k);
    if (ms->id1) {
        m->v[ms->id1 - 1] = v;
        return 0;
    }
    size_t c1 = m->cap, c2 = m->cap;
    if (TKP_GROW_FROM(m->k1, c1, m->n + 1, 1024) || TKP_GROW_FROM(m->k2, c2, m->n + 1, 1024))
        return TKP_ERR_NOMEM;
    if (TKP_GROW_FROM(m->v, m->cap, m->n + 1, 1024)) return TKP_ERR_NOMEM;
    m->k1[m->n] = a, m->k2[m->n] = b, m->v[m->n] = v;
    tkp_map_put(&m->ix, ms, h, (uint32_t)m->n++);
    return 0;
}

static void map_free(struct map *m)
{
    free(m->k1), free(m->k2), free(m->v);
    tkp_map_free(&m->ix);
}

/* ---- state ------------------------------------------------------------------------------------ */

struct stack {
    uint32_t n;
    uint64_t *pcs;
};
struct group {
    char *name, *display;
    uint64_t launches, sampled, gpu_ns;
};
struct agg { /* one (group, stack) */
    uint32_t group, stack;
    uint64_t count, gpu_ns;
};
struct path { /* (group, symbolised path): aggs with equal paths merged */
    uint32_t group;
    char *folded; /* root first, ';'-separated */
    const char *site;
    uint32_t stack; /* one stack with this path, for the frames of --json */
    uint64_t count, gpu_ns;
};

struct st {
    struct tkp_ctx *ctx;
    int by_class, json, folded, top, depth;
    const char *svg;
    struct tkp_classes *classes;
    struct tkp_symbolizer *sym;
    struct map stack_ids, group_ids, agg_ids, join;
    struct stack *stacks;
    size_t nstacks, stacks_cap;
    struct group *groups;
    size_t ngroups, groups_cap;
    struct agg *aggs;
    size_t naggs, aggs_cap;
    struct path *paths;
    size_t npaths;
    uint64_t *th_step, *th_count; /* per thread: current step and launches in it */
    uint64_t launches, sampled, gpu_records;
};


/* The group of a kernel name (id in kernel mode), created on first sight. */
static int group_of(struct st *s, uint64_t name_id, const char *name, uint32_t *g)
{
    uint64_t key = s->by_class ? (uint64_t)tkp_classes_match(s->classes, name) : name_id;
    if (map_get(&s->group_ids, key, 0, g)) return 0;
    if (TKP_GROW(s->groups, s->groups_cap, s->ngroups + 1)) return TKP_ERR_NOMEM;
    struct group *gr = &s->groups[s->ngroups];
    memset(gr, 0, sizeof *gr);
    if (s->by_class) {
        gr->name = strdup(tkp_classes_name(s->classes, (int)key));
        gr->display = strdup(gr->name);
    } else {
        char b[512], *d = tkp_demangle(name);
        gr->name = strdup(name);
        gr->display = d ? strdup(tkp_short_name(d, b, sizeof b)) : NULL;
        free(d);
    }
    if (!gr->name || !gr->display) return TKP_ERR_NOMEM;
    *g = (uint32_t)s->ngroups++;
    return map_put(&s->group_ids, key, 0, *g);
}

static int on_stack(struct st *s, const struct tkp_record *r)
{
    uint32_t idx;
    if (map_get(&s->stack_ids, r->stack.id, 0, &idx)) {
        struct stack *k = &s->stacks[idx]; /* repeated per chunk; a fork child may reuse ids */
        if (k->n == r->stack.n && !memcmp(k->pcs, r->stack.pcs, k->n * sizeof *k->pcs)) return 0;
        free(k->pcs);
    } else {
        if (s->nstacks >= MAX_STACKS) return 0;
        if (TKP_GROW(s->stacks, s->stacks_cap, s->nstacks + 1)) return TKP_ERR_NOMEM;
        idx = (uint32_t)s->nstacks++;
        if (map_put(&s->stack_ids, r->stack.id, 0, idx)) return TKP_ERR_NOMEM;
    }
    struct stack *k = &s->stacks[idx];
    k->n = r->stack.n;
    k->pcs = malloc((k->n ? k->n : 1) * sizeof *k->pcs);
    if (!k->pcs) return TKP_ERR_NOMEM;
    memcpy(k->pcs, r->stack.pcs, k->n * sizeof *k->pcs);
    return 0;
}

static int on_launch(struct st *s, const struct tkp_record *r)
{
    uint32_t g, t = r->thread, stk, a;
    int err = group_of(s, r->launch.name_id, r->launch.name, &g);
    if (err) return err;
    /* the launch's ordinal among its thread's launches in its step: the GPU join index */
    if (s->th_step[t] != r->step) s->th_step[t] = r->step, s->th_count[t] = 0;
    uint64_t index = s->th_count[t]++;
    s->launches++;
    s->groups[g].launches++;
    if (!r->launch.stack || !map_get(&s->stack_ids, r->launch.stack, 0, &stk)) return 0;
    s->sampled++;
    s->groups[g].sampled++;
    if (!map_get(&s->agg_ids, g, stk, &a)) {
        if (TKP_GROW(s->aggs, s->aggs_cap, s->naggs + 1)) return TKP_ERR_NOMEM;
        a = (uint32_t)s->naggs++;
        s->aggs[a] = (struct agg){g, stk, 0, 0};
        if (map_put(&s->agg_ids, g, stk, a)) return TKP_ERR_NOMEM;
    }
    s->aggs[a].count++;
    return map_put(&s->join, (uint64_t)t << 32 | (index & 0xffffffffu), r->step, a);
}

static int on_gpu_kernel(struct st *s, const struct tkp_record *r)
{
    uint32_t g, a;
    uint64_t ns = r->gpu.end_ns - r->gpu.start_ns;
    s->gpu_records++;
    int err = group_of(s, r->gpu.name_id, r->gpu.name, &g);
    if (err) return err;
    s->groups[g].gpu_ns += ns;
    if (r->gpu.join == TKP_JOIN_LAUNCH && r->thread < TKP_THREADS_MAX &&
        map_get(&s->join, (uint64_t)r->thread << 32 | r->gpu.index, r->step, &a))
        s->aggs[a].gpu_ns += ns;
    return 0;
}

/* ---- paths ------------------------------------------------------------------------------------ */

/* Modules whose frames are the CUDA stack, not the program: the launch site is below them. */
static int cuda_module(const char *m)
{
    static const char *const pre[] = {"libcudart", "libcuda.", "libcublas", "libcudnn",
                                      "libnccl",   "libtokprof", "libcupti"};
    for (size_t i = 0; m && i < sizeof pre / sizeof *pre; i++)
        if (!strncmp(m, pre[i], strlen(pre[i]))) return 1;
    return 0;
}

/* nvcc's launch stubs (named after the kernel, or __device_stub__*) and cudaLaunchKernel<>
 * wrappers from cuda_runtime.h sit between the program's code and the runtime. */
static int stub_frame(const char *fn, const char *kernel)
{
    return !strncmp(fn, "__device_stub__", 15) || !strncmp(fn, "cudaLaunchKernel", 16) ||
           !strcmp(fn, kernel);
}

static void label(const struct tkp_frame *f, char *b, size_t n)
{
    if (f->short_name) snprintf(b, n, "%s", f->short_name);
    else if (f->module) snprintf(b, n, "[%s+0x%" PRIx64 "]", f->module, f->offset);
    else snprintf(b, n, "[0x%" PRIx64 "]", f->pc);
    for (char *p = b; *p; p++)
        if (*p == ';') *p = ':'; /* the folded format's separator */
}

struct pkey {
    uint32_t group;
    const char *folded;
};

static int eq_path(const void *ctx, uint32_t id, const void *key)
{
    const struct path *p = &((const struct st *)ctx)->paths[id];
    const struct pkey *k = key;
    return p->group == k->group && !strcmp(p->folded, k->folded);
}

static int build_paths(struct st *s)
{
    struct tkp_map ids = {0}; /* paths by (group, folded) */
    s->paths = calloc(s->naggs ? s->naggs : 1, sizeof *s->paths);
    if (!s->paths) return TKP_ERR_NOMEM;
    for (size_t i = 0; i < s->naggs; i++) {
        const struct agg *a = &s->aggs[i];
        const struct stack *k = &s->stacks[a->stack];
        const struct group *g = &s->groups[a->group];
        size_t cap = 256, len = 0;
        char *fold = malloc(cap), b[1024];
        const char *site = NULL;
        if (!fold) return tkp_map_free(&ids), TKP_ERR_NOMEM;
        fold[0] = 0;
        for (uint32_t j = k->n; j-- > 0;) { /* root first */
            struct tkp_frame f;
            tkp_symbolize(s->sym, k->pcs[j], &f);
            label(&f, b, sizeof b);
            size_t bl = strlen(b);
            if (TKP_GROW_FROM(fold, cap, len + bl + 2, 256))
                return free(fold), tkp_map_free(&ids), TKP_ERR_NOMEM;
            if (len) fold[len++] = ';';
            memcpy(fold + len, b, bl + 1);
            len += bl;
        }
        for (uint32_t j = 0; j < k->n && !site; j++) { /* innermost program frame */
            struct tkp_frame f;
            tkp_symbolize(s->sym, k->pcs[j], &f);
            if (!cuda_module(f.module) && (!f.short_name || !stub_frame(f.short_name, g->display)))
                site = f.short_name ? f.short_name : f.module;
        }
        /* merge equal paths of a group: inlining and different return addresses in one
         * function give distinct stacks that read the same */
        struct pkey key = {a->group, fold};
        uint64_t h = tkp_hash_pair(a->group, tkp_fnv64_str(TKP_FNV64_SEED, fold));
        if (tkp_map_reserve(&ids, s->npaths + 1))
            return free(fold), tkp_map_free(&ids), TKP_ERR_NOMEM;
        struct tkp_map_slot *ms = tkp_map_probe(&ids, h, eq_path, s, &key);
        if (ms->id1) {
            s->paths[ms->id1 - 1].count += a->count;
            s->paths[ms->id1 - 1].gpu_ns += a->gpu_ns;
            free(fold);
            continue;
        }
        uint32_t pi;
        tkp_map_put(&ids, ms, h, (uint32_t)s->npaths);
        pi = (uint32_t)s->npaths++;
        s->paths[pi] =
            (struct path){a->group, fold, site ? site : "?", a->stack, a->count, a->gpu_ns};
    }
    tkp_map_free(&ids);
    return 0;
}

/* ---- output ----------------------------------------------------------------------------------- */

static struct st *sort_st; /* qsort has no context argument in C11 */

static int group_cmp(const void *x, const void *y)
{
    const struct group *a = &sort_st->groups[*(const uint32_t *)x];
    const struct group *b = &sort_st->groups[*(const uint32_t *)y];
    if (a->sampled != b->sampled) return a->sampled < b->sampled ? 1 : -1;
    if (a->launches != b->launches) return a->launches < b->launches ? 1 : -1;
    return strcmp(a->display, b->display);
}

static int path_cmp(const void *x, const void *y)
{
    const struct path *a = x, *b = y;
    if (a->group != b->group) return a->group < b->group ? -1 : 1;
    if (a->count != b->count) return a->count < b->count ? 1 : -1;
    return strcmp(a->folded, b->folded);
}

static void print_frames_json(struct st *s, FILE *f, const struct stack *k)
{
    fputs(",\"frames\":[", f);
    for (uint32_t j = 0; j < k->n; j++) {
        struct tkp_frame fr;
        tkp_symbolize(s->sym, k->pcs[j], &fr);
        fputs(j ? ",{\"pc\":" : "{\"pc\":", f);
        tkp_json_hex(f, fr.pc);
        fputs(",\"module\":", f);
        if (fr.module) tkp_json_str(f, fr.module);
        else fputs("null", f);
        fputs(",\"function\":", f);
        if (fr.function) tkp_json_str(f, fr.function);
        else fputs("null", f);
        fputs(",\"short\":", f);
        if (fr.short_name) tkp_json_str(f, fr.short_name);
        else fputs("null", f);
        fprintf(f, ",\"offset\":%" PRIu64 "}", fr.offset);
    }
    putc(']', f);
}

/* The path innermost first from the site on, " < "-separated, at most depth frames. */
static void print_path_text(FILE *f, const struct path *p, int depth)
{
    const char *fr[256];
    int n = 0;
    char *copy = strdup(p->folded);
    if (!copy) return;
    for (char *save, *t = strtok_r(copy, ";", &save); t && n < 256; t = strtok_r(NULL, ";", &save))
        fr[n++] = t;
    int start = n - 1;
    for (int j = n - 1; j >= 0; j--)
        if (!strcmp(fr[j], p->site)) {
            start = j;
            break;
        }
    for (int j = start, k = 0; j >= 0 && k < depth; j--, k++)
        fprintf(f, "%s%s", k ? " < " : "", fr[j]);
    if (start >= depth) fputs(" < ...", f);
    free(copy);
}

static void output_text(struct st *s, const uint32_t *order, FILE *f)
{
    fprintf(f, "%" PRIu64 " launches, %" PRIu64 " with a sampled stack, %zu distinct stacks\n",
            s->launches, s->sampled, s->nstacks);
    if (!s->sampled) {
        fputs("no stacks: capture with TOKPROF_STACKS=first:4 or TOKPROF_STACKS=sample:1000\n", f);
        return;
    }
    for (size_t gi = 0; gi < s->ngroups; gi++) {
        const struct group *g = &s->groups[order[gi]];
        if (!g->sampled) continue;
        fprintf(f, "\n%s  (%" PRIu64 " launches, %" PRIu64 " sampled", g->display, g->launches,
                g->sampled);
        if (g->gpu_ns) fprintf(f, ", GPU %.3f ms", (double)g->gpu_ns / 1e6);
        fputs(")\n", f);
        int k = 0;
        for (size_t q = 0; q < s->npaths; q++) {
            const struct path *x = &s->paths[q];
            if (x->group != order[gi] || k++ >= s->top) continue;
            fprintf(f, "  %6" PRIu64 " %5.1f%%  ", x->count, 100.0 * (double)x->count /
                                                              (double)g->sampled);
            if (s->gpu_records) fprintf(f, "%9.3f ms  ", (double)x->gpu_ns / 1e6);
            print_path_text(f, x, s->depth);
            putc('\n', f);
        }
    }
}

static void output_json(struct st *s, const uint32_t *order, FILE *f)
{
    fprintf(f, "{\"by\":\"%s\",\"launches\":%" PRIu64 ",\"sampled\":%" PRIu64
               ",\"stacks\":%zu,\"gpu\":%s,\"groups\":[",
            s->by_class ? "class" : "kernel", s->launches, s->sampled, s->nstacks,
            s->gpu_records ? "true" : "false");
    int first = 1;
    for (size_t gi = 0; gi < s->ngroups; gi++) {
        const struct group *g = &s->groups[order[gi]];
        if (!g->launches) continue;
        fputs(first ? "\n{\"name\":" : ",\n{\"name\":", f);
        first = 0;
        tkp_json_str(f, g->name);
        fputs(",\"display\":", f);
        tkp_json_str(f, g->display);
        fprintf(f, ",\"launches\":%" PRIu64 ",\"sampled\":%" PRIu64 ",\"gpu_ns\":%" PRIu64
                   ",\"paths\":[",
                g->launches, g->sampled, g->gpu_ns);
        int k = 0;
        for (size_t q = 0; q < s->npaths; q++) {
            const struct path *x = &s->paths[q];
            if (x->group != order[gi] || k >= s->top) continue;
            fprintf(f, "%s{\"count\":%" PRIu64 ",\"gpu_ns\":%" PRIu64 ",\"site\":", k ? "," : "",
                    x->count, x->gpu_ns);
            tkp_json_str(f, x->site);
            fputs(",\"folded\":", f);
            tkp_json_str(f, x->folded);
            print_frames_json(s, f, &s->stacks[x->stack]);
            putc('}', f);
            k++;
        }
        fputs("]}", f);
    }
    fputs("\n]}\n", f);
}

static void output_folded(struct st *s, FILE *f)
{
    for (size_t q = 0; q < s->npaths; q++)
        fprintf(f, "%s;[%s] %" PRIu64 "\n", s->paths[q].folded, s->groups[s->paths[q].group].display,
                s->paths[q].count);
}

static int output_svg(struct st *s)
{
    FILE *f = fopen(s->svg, "w");
    if (!f) return tkp_cmd_fail(s->ctx, TKP_ERR_IO, "%s: cannot create", s->svg);
    struct tkp_flame_line *lines = calloc(s->npaths ? s->npaths : 1, sizeof *lines);
    char **frames = calloc(s->npaths ? s->npaths : 1, sizeof *frames);
    const char **ptrs = NULL;
    size_t nptrs = 0, cap = 0;
    int err = lines && frames ? 0 : TKP_ERR_NOMEM;
    for (size_t q = 0; q < s->npaths && !err; q++) { /* count frames first: ptrs must not move */
        for (const char *c = s->paths[q].folded; *c; c++) cap += *c == ';';
        cap += 2;
    }
    if (!err && !(ptrs = calloc(cap ? cap : 1, sizeof *ptrs))) err = TKP_ERR_NOMEM;
    for (size_t q = 0; q < s->npaths && !err; q++) {
        if (!(frames[q] = strdup(s->paths[q].folded))) {
            err = TKP_ERR_NOMEM;
            break;
        }
        lines[q].frames = ptrs + nptrs;
        for (char *save, *t = strtok_r(frames[q], ";", &save); t; t = strtok_r(NULL, ";", &save))
            ptrs[nptrs++] = t, lines[q].n++;
        ptrs[nptrs++] = s->groups[s->paths[q].group].display, lines[q].n++;
        lines[q].weight = s->paths[q].count;
    }
    if (!err) err = tkp_flame_svg(f, lines, s->npaths, "tokprof stacks: where launches come from",
                                  "sampled launches");
    for (size_t q = 0; frames && q < s->npaths; q++) free(frames[q]);
    free(frames), free(lines), free(ptrs);
    if (fclose(f) && !err) err = TKP_ERR_IO;
    if (err == TKP_ERR_IO) return tkp_cmd_fail(s->ctx, err, "%s: cannot write", s->svg);
    return err;
}

/* ---- command ---------------------------------------------------------------------------------- */

/* --by kernel|class */
static int by(struct tkp_ctx *ctx, const char *name, const char *v, void *dst)
{
    if (strcmp(v, "kernel") && strcmp(v, "class"))
        return tkp_cmd_fail(ctx, TKP_ERR_USAGE, "%s takes kernel or class", name);
    *(int *)dst = !strcmp(v, "class");
    return 0;
}

static int parse(struct st *s, int argc, char **argv, const char **path, const char **root,
                 const char **classes)
{
    const char *arg[2];
    uint64_t top = (uint64_t)s->top, depth = (uint64_t)s->depth;
    size_t n;
    const struct tkp_opt opts[] = {
        {"--json", 'f', &s->json, 0, NULL, NULL},
        {"--folded", 'f', &s->folded, 0, NULL, NULL},
        {"--svg", 's', &s->svg, 0, NULL, NULL},
        {"--root", 's', root, 0, NULL, NULL},
        {"--classes", 's', classes, 0, NULL, NULL},
        {"--top", 'u', &top, INT_MAX, NULL, NULL},
        {"--depth", 'u', &depth, INT_MAX, NULL, NULL},
        {"--by", 'c', &s->by_class, 0, NULL, by},
    };
    int err = tkp_cmd_parse_args(s->ctx, argc, argv, opts, sizeof(opts) / sizeof(*opts), arg, 2,
                                 &n);
    if (err) return err;
    if (!n) return tkp_cmd_fail(s->ctx, TKP_ERR_USAGE, "no capture file given");
    if (n > 1) return tkp_cmd_fail(s->ctx, TKP_ERR_USAGE, "one capture at a time ('%s')", arg[1]);
    *path = arg[0];
    s->top = (int)top, s->depth = (int)depth;
    if (s->top < 1 || s->depth < 1)
        return tkp_cmd_fail(s->ctx, TKP_ERR_USAGE, "--top and --depth take a number above 0");
    if (s->json + s->folded > 1)
        return tkp_cmd_fail(s->ctx, TKP_ERR_USAGE, "--json and --folded exclude each other");
    return 0;
}

static void cleanup(struct st *s)
{
    for (size_t i = 0; i < s->nstacks; i++) free(s->stacks[i].pcs);
    for (size_t i = 0; i < s->ngroups; i++) free(s->groups[i].name), free(s->groups[i].display);
    for (size_t i = 0; i < s->npaths; i++) free(s->paths[i].folded);
    free(s->stacks), free(s->groups), free(s->aggs), free(s->paths);
    free(s->th_step), free(s->th_count);
    map_free(&s->stack_ids), map_free(&s->group_ids), map_free(&s->agg_ids), map_free(&s->join);
    tkp_symbolizer_free(s->sym);
    tkp_classes_free(s->classes);
}

static int run(int argc, char **argv, struct tkp_ctx *ctx)
{
    struct st s = {.ctx = ctx, .top = 5, .depth = 8};
    const char *path = NULL, *root = NULL, *classes = NULL;
    int err = parse(&s, argc, argv, &path, &root, &classes);
    if (err) return err;
    if (s.by_class && (err = tkp_classes_new(classes, &s.classes, ctx->why, sizeof ctx->why)))
        return err;
    s.sym = tkp_symbolizer_new(root);
    s.th_step = malloc(TKP_THREADS_MAX * sizeof *s.th_step);
    s.th_count = calloc(TKP_THREADS_MAX, sizeof *s.th_count);
    if (!s.sym || !s.th_step || !s.th_count) return cleanup(&s), TKP_ERR_NOMEM;
    memset(s.th_step, 0xff, TKP_THREADS_MAX * sizeof *s.th_step);

    struct tkp_reader *r;
    struct tkp_record rec;
    if ((err = tkp_cmd_open(ctx, path, &r))) return cleanup(&s), err;
    if (tkp_reader_is_merged(r)) { /* STACK and MODULE ids are per process */
        tkp_reader_close(r);
        cleanup(&s);
        return tkp_cmd_fail(ctx, TKP_ERR_USAGE, "%s: one process at a time (these captures are "
                            "of several)", path);
    }
    while (!err && tkp_reader_next(r, &rec) == 1) {
        switch (rec.type) {
        case TKP_REC_MODULE:
            err = tkp_symbolizer_add_module(s.sym, rec.module.id, rec.module.path,
                                            rec.module.build_id, rec.module.base,
                                            rec.module.size);
            break;
        case TKP_REC_STACK: err = on_stack(&s, &rec); break;
        case TKP_REC_LAUNCH: err = on_launch(&s, &rec); break;
        case TKP_REC_GPU_KERNEL: err = on_gpu_kernel(&s, &rec); break;
        default: break;
        }
    }
    tkp_cmd_warn_reader(ctx, path, r);
    tkp_reader_close(r);
    if (!err) err = build_paths(&s);
    uint32_t *order = err ? NULL : malloc((s.ngroups ? s.ngroups : 1) * sizeof *order);
    if (!err && !order) err = TKP_ERR_NOMEM;
    if (!err) {
        for (size_t i = 0; i < s.ngroups; i++) order[i] = (uint32_t)i;
        sort_st = &s;
        tkp_sort(order, s.ngroups, sizeof *order, group_cmp);
        tkp_sort(s.paths, s.npaths, sizeof *s.paths, path_cmp);
        if (s.json) output_json(&s, order, ctx->out);
        else if (s.folded) output_folded(&s, ctx->out);
        else if (!s.svg) output_text(&s, order, ctx->out);
        if (s.svg) err = output_svg(&s);
        int bad = tkp_symbolizer_problems(s.sym, NULL);
        if (bad) {
            ctx->warn(ctx, "%d module(s) could not be symbolised (their frames read [module+0x..]; "
                           "--root DIR reads them under DIR):", bad);
            tkp_symbolizer_problems(s.sym, stderr);
        }
    }
    free(order);
    cleanup(&s);
    return err;
}

const struct tkp_cmd tkp_cmd_stacks = {
    .name = "stacks",
    .brief = "where launches come from: sampled host call stacks per kernel",
    .usage =
        "usage: tokprof stacks [--by kernel|class] [--top N] [--depth N] [--json | --folded]\n"
        "                      [--svg FILE] [--root DIR] [--classes FILE] CAPTURE\n"
        "\n"
        "The host call paths that launched each kernel, from the call stacks the shim sampled\n"
        "(capture with TOKPROF_STACKS=first:K, the first K launches of each kernel, or\n"
        "TOKPROF_STACKS=sample:N, one launch in N). Frames are symbolised here, from the ELF\n"
        "symbols of the modules the program had loaded (C++ names demangled), so run it where\n"
        "those files are, or give --root DIR holding a copy of them. Each path starts at its\n"
        "site, the innermost frame of the program itself (below the CUDA runtime, cuBLAS and\n"
        "nvcc's launch stubs). With GPU records, the GPU time of the sampled launches is shown.\n"
        "\n"
        "  --by class     group by kernel class instead of kernel name (--classes FILE: rules)\n"
        "  --top N        paths per group (5); --depth N: frames per path shown (8)\n"
        "  --json         everything, with each path's frames (pc, module, function, offset)\n"
        "  --folded       'root;...;leaf;[kernel] count' lines for flamegraph.pl, speedscope\n"
        "  --svg FILE     also write a flame graph of all paths\n"
        "\n"
        "example:\n"
        "  TOKPROF_STACKS=first:4 tokprof run python serve.py\n"
        "  tokprof stacks --svg launches.svg python.1234.tokprof\n",
    .run = run,
};
