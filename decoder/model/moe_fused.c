/* Fused and grouped MoE expert kernels per step (moe_fused.h). */
#include "model/moe_fused.h"

#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/classes.h"
#include "base/map.h"
#include "base/err.h"
#include "base/grow.h"
#include "capture/reader.h"
#include "base/sort.h"

struct tkp_fgraph {
    uint64_t graph;
    uint32_t fused; /* its kernel nodes that are fused expert kernels */
};

struct fkey {
    uint32_t thread;
    uint64_t step;
};

static int eq_step(const void *ctx, uint32_t id, const void *key)
{
    const struct tkp_fused_step *s = &((const struct tkp_fused *)ctx)->steps[id];
    const struct fkey *k = key;
    return s->thread == k->thread && s->step == k->step;
}

/* The step's row, created on first use. NULL: out of memory. */
static struct tkp_fused_step *step_row(struct tkp_fused *f, uint32_t thread, uint64_t step)
{
    struct fkey k = {thread, step};
    uint64_t h = tkp_hash_pair(thread, step);
    if (tkp_map_reserve(&f->ix, f->nsteps + 1)) return NULL;
    struct tkp_map_slot *ms = tkp_map_probe(&f->ix, h, eq_step, f, &k);
    if (ms->id1) return &f->steps[ms->id1 - 1];
    if (TKP_GROW(f->steps, f->cap, f->nsteps + 1)) return NULL;
    tkp_map_put(&f->ix, ms, h, (uint32_t)f->nsteps);
    struct tkp_fused_step *s = &f->steps[f->nsteps++];
    memset(s, 0, sizeof(*s));
    s->thread = thread, s->step = step;
    return s;
}

/* 1 when the name is a fused expert kernel (re[0] and not re[1]), 0 when not, negative on no
 * memory. Names are the reader's strings, alive until it closes: each is classified once (a
 * linear list: captures have hundreds of distinct names, and the last one asked is checked
 * first). */
static int is_fused(struct tkp_fused *f, const regex_t *re, const char *name)
{
    if (!name) return 0;
    for (size_t i = f->nseen; i-- > 0;)
        if (f->seen[i] == name) return f->seen_ok[i];
    size_t cap = f->seen_cap;
    if (TKP_GROW(f->seen, f->seen_cap, f->nseen + 1)) return TKP_ERR_NOMEM;
    if (TKP_GROW(f->seen_ok, cap, f->nseen + 1)) return TKP_ERR_NOMEM;
    int ok = regexec(&re[0], name, 0, NULL, 0) == 0 && regexec(&re[1], name, 0, NULL, 0) != 0;
    f->seen[f->nseen] = name, f->seen_ok[f->nseen++] = (unsigned char)ok;
    if (ok && f->nnames < TKP_MOE_FUSED_NAMES) {
        size_t i = 0;
        while (i < f->nnames && strcmp(f->names[i], name)) i++;
        if (i == f->nnames) f->names[f->nnames++] = name;
    }
    return ok;
}

static int cmp_step(const void *a, const void *b)
{
    const struct tkp_fused_step *x = a, *y = b;
    if (x->thread != y->thread) return x->thread < y->thread ? -1 : 1;
    return x->step < y->step ? -1 : x->step > y->step;
}

static int add(struct tkp_fused *f, const regex_t *re, const struct tkp_record *rec)
{
    int ok;
    struct tkp_fused_step *s;
    switch (rec->type) {
    case TKP_REC_LAUNCH:
        if ((ok = is_fused(f, re, rec->launch.name)) <= 0) return ok;
        if (!(s = step_row(f, rec->thread, rec->step))) return TKP_ERR_NOMEM;
        s->launches++, f->launches++;
        return 0;
    case TKP_REC_GRAPH: {
        uint32_t n = 0;
        for (size_t i = 0; i < f->ngraphs; i++)
            if (f->graphs[i].graph == rec->graph.graph) return 0; /* re-emitted per chunk */
        for (uint32_t i = 0; i < rec->graph.nnodes; i++) {
            const struct tkp_graph_node *nd = &rec->graph.nodes[i];
            if (nd->type != TKP_NODE_KERNEL) continue;
            if ((ok = is_fused(f, re, nd->name)) < 0) return ok;
            n += (uint32_t)ok;
        }
        if (!n) return 0; /* only graphs with fused nodes are kept */
        if (TKP_GROW(f->graphs, f->cap_graphs, f->ngraphs + 1)) return TKP_ERR_NOMEM;
        f->graphs[f->ngraphs++] = (struct tkp_fgraph){rec->graph.graph, n};
        return 0;
    }
    case TKP_REC_GRAPH_LAUNCH:
        for (size_t i = 0; i < f->ngraphs; i++) {
            if (f->graphs[i].graph != rec->graph_launch.graph) continue;
            if (!(s = step_row(f, rec->thread, rec->step))) return TKP_ERR_NOMEM;
            s->launches += f->graphs[i].fused, f->launches += f->graphs[i].fused;
            return 0;
        }
        return 0;
    case TKP_REC_GPU_KERNEL:
        if ((ok = is_fused(f, re, rec->gpu.name)) <= 0) return ok;
        f->kernels++, f->gpu_ns += rec->gpu.end_ns - rec->gpu.start_ns;
        if (rec->thread == TKP_GPU_THREAD_NONE || rec->gpu.join == TKP_JOIN_NONE) return 0;
        if (!(s = step_row(f, rec->thread, rec->step))) return TKP_ERR_NOMEM;
        s->kernels++, s->gpu_ns += rec->gpu.end_ns - rec->gpu.start_ns;
        return 0;
    default:
        return 0;
    }
}

char *tkp_fused_display_name(const char *name, char *buf, size_t n)
{
    regex_t re;
    tkp_kernel_base_name(name, buf, n);
    if (regcomp(&re, TKP_MOE_FUSED_RE, REG_EXTENDED | REG_ICASE | REG_NOSUB)) return buf;
    if (regexec(&re, buf, 0, NULL, 0)) snprintf(buf, n, "%s", name);
    regfree(&re);
    return buf;
}

int tkp_fused_load(struct tkp_reader *r, struct tkp_fused *f)
{
    regex_t re[2]; /* the names, and the set-up kernels among them that are not */
    struct tkp_record rec;
    int err;
    memset(f, 0, sizeof(*f));
    if (regcomp(&re[0], TKP_MOE_FUSED_RE, REG_EXTENDED | REG_ICASE | REG_NOSUB)) return TKP_ERR_NOMEM;
    if (regcomp(&re[1], TKP_MOE_FUSED_NOT_RE, REG_EXTENDED | REG_ICASE | REG_NOSUB)) {
        regfree(&re[0]);
        return TKP_ERR_NOMEM;
    }
    while ((err = tkp_reader_next(r, &rec)) == 1)
        if ((err = add(f, re, &rec))) break;
    regfree(&re[0]);
    regfree(&re[1]);
    if (err < 0) return err;
    if (f->nsteps > 1) tkp_sort(f->steps, f->nsteps, sizeof(*f->steps), cmp_step);
    return 0;
}

void tkp_fused_free(struct tkp_fused *f)
{
    free(f->steps);
    tkp_map_free(&f->ix);
    free(f->seen);
    free(f->seen_ok);
    free(f->graphs);
    memset(f, 0, sizeof(*f));
}
