/* tokprof check: the parsed tree's shared helpers: node allocation, the attribute table (which
 * r./s. names exist, which need GPU time, which are times or strings) and bound lookup, used by
 * the parser, the compiler, the lowering and the result printer alike. */
#include <stdlib.h>
#include <string.h>

#include "check/ast.h"
#include "base/grow.h"

static const struct {
    const char *name;
    int gpu, time, str;
} attrs[A_COUNT_] = {
    [A_R_ID] = {"r.id", 0, 0, 0},           [A_R_KIND] = {"r.kind", 0, 0, 1},
    [A_R_NAME] = {"r.name", 0, 0, 1},       [A_R_STREAM] = {"r.stream", 0, 0, 0},
    [A_R_STEP] = {"r.step", 0, 0, 0},       [A_R_TOKEN] = {"r.token", 0, 0, 0},
    [A_R_HOST] = {"r.host_ts", 0, 1, 0},    [A_R_POS] = {"r.pos", 0, 0, 0},
    [A_R_GPU_START] = {"r.gpu_start", 1, 1, 0}, [A_R_GPU_END] = {"r.gpu_end", 1, 1, 0},
    [A_R_DUR] = {"r.dur", 1, 1, 0},         [A_R_LIB] = {"r.lib", 0, 0, 1},
    [A_R_OP] = {"r.op", 0, 0, 1},           [A_R_M] = {"r.m", 0, 0, 0},
    [A_R_N] = {"r.n", 0, 0, 0},             [A_R_K] = {"r.k", 0, 0, 0},
    [A_R_BATCH] = {"r.batch", 0, 0, 0},     [A_R_BYTES] = {"r.bytes", 0, 0, 0},
    [A_R_DIR] = {"r.dir", 0, 0, 1},         [A_R_SYNC] = {"r.sync", 0, 0, 0},
    [A_R_ASYNC] = {"r.async", 0, 0, 0},     [A_R_GRID] = {"r.grid", 0, 0, 0},
    [A_R_BLOCK] = {"r.block", 0, 0, 0},     [A_R_WAIT] = {"r.wait", 0, 1, 0},
    [A_R_THREAD] = {"r.thread", 0, 0, 0},
    [A_S_IDX] = {"s.idx", 0, 0, 0},         [A_S_TOKEN] = {"s.token", 0, 0, 0},
    [A_S_KIND] = {"s.kind", 0, 0, 1},       [A_S_PHASE] = {"s.phase", 0, 0, 1},
    [A_S_LEN] = {"s.len", 0, 0, 0},         [A_S_START] = {"s.start", 0, 1, 0},
    [A_S_END] = {"s.end", 0, 1, 0},         [A_S_MARK] = {"s.mark", 0, 1, 0},
    [A_S_DUR] = {"s.dur", 0, 1, 0},         [A_S_GPU_START] = {"s.gpu_start", 1, 1, 0},
    [A_S_GPU_END] = {"s.gpu_end", 1, 1, 0}, [A_S_GPU_DUR] = {"s.gpu_dur", 1, 1, 0},
    [A_S_BUSY] = {"s.busy", 1, 1, 0},       [A_S_IDLE] = {"s.idle_frac", 1, 0, 0},
    [A_S_MAXGAP] = {"s.maxgap", 1, 1, 0},   [A_S_LAUNCHES] = {"s.launches", 0, 0, 0},
    [A_S_THREAD] = {"s.thread", 0, 0, 0},
};

const char *tkp_attr_name(int a) { return attrs[a].name; }
int tkp_attr_gpu(int a) { return attrs[a].gpu; }
int tkp_attr_time(int a) { return attrs[a].time; }
int tkp_attr_is_str(int a) { return attrs[a].str; }

int tkp_attr_lookup(int is_r, const char *name)
{
    for (int i = is_r ? 0 : A_S_IDX; i < (is_r ? A_S_IDX : A_COUNT_); i++)
        if (!strcmp(attrs[i].name + 2, name)) return i;
    if (!is_r && !strcmp(name, "gpu_end")) return A_S_GPU_END;
    if (is_r && !strcmp(name, "host_ns")) return A_R_HOST;
    return -1;
}

int tkp_bound_cmp(const struct tkp_spec *sp, int n)
{
    while (n >= 0 && sp->n[n].op == OP_IMPLIES) n = sp->n[n].b;
    return n >= 0 && sp->n[n].op >= OP_EQ && sp->n[n].op <= OP_GE ? n : -1;
}

int tkp_spec_grow(void **p, int *cap, int n, size_t size)
{
    size_t c = (size_t)*cap;
    if (tkp_grow_to(p, &c, (size_t)n + 1, size, 16, 0)) return -1;
    *cap = (int)c;
    return 0;
}

int tkp_spec_node_new(struct tkp_spec *sp, int op, uint32_t line, uint32_t col)
{
    if (tkp_spec_grow((void **)&sp->n, &sp->capn, sp->nn, sizeof(*sp->n))) return -1;
    struct tkp_node *x = &sp->n[sp->nn];
    memset(x, 0, sizeof(*x));
    x->op = op, x->line = line, x->col = col;
    x->a = x->b = x->c = -1;
    x->slot = x->cls = -1;
    x->src = -1;
    return sp->nn++;
}
