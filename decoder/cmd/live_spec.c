/* tokprof decoder: spec monitors per followed process (one check/monitor.h monitor each), for
 * `tokprof check --follow` and `tokprof serve --spec`. Apart from cmd/live.c, whose follow loop
 * (cmd/live.h) is handed them as an opaque struct tkp_live_mons and so knows nothing of specs. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/cmd.h"
#include "cmd/live_spec.h"
#include "base/err.h"
#include "base/grow.h"
#include "capture/reader.h"
#include "check/ast.h"
#include "check/compile.h"
#include "check/monitor.h"
#include "check/parse.h"

/* ---- monitors per process ---- */

struct lmon {
    uint64_t pid;
    struct tkp_mon *m;
    uint64_t *seen; /* violations reported, per assertion */
    int finished;
};

struct tkp_live_mons {
    const struct tkp_spec *sp;
    tkp_live_viol_fn *on_viol;
    void *arg;
    struct lmon *v;
    size_t n, cap;
    struct lmon *last;
};

int tkp_live_mons_new(const struct tkp_spec *sp, tkp_live_viol_fn *on_viol, void *arg,
                      struct tkp_live_mons **out)
{
    *out = calloc(1, sizeof(**out));
    if (!*out) return TKP_ERR_NOMEM;
    (*out)->sp = sp;
    (*out)->on_viol = on_viol;
    (*out)->arg = arg;
    return 0;
}

static void lmon_free(struct lmon *x)
{
    tkp_mon_free(x->m);
    free(x->seen);
}

void tkp_live_mons_free(struct tkp_live_mons *ms)
{
    if (!ms) return;
    for (size_t i = 0; i < ms->n; i++)
        lmon_free(&ms->v[i]);
    free(ms->v);
    free(ms);
}

static struct lmon *mon_of(struct tkp_live_mons *ms, uint64_t pid, int make)
{
    if (ms->last && ms->last->pid == pid) return ms->last;
    for (size_t i = 0; i < ms->n; i++)
        if (ms->v[i].pid == pid) return ms->last = &ms->v[i];
    if (!make) return NULL;
    if (TKP_GROW_FROM(ms->v, ms->cap, ms->n + 1, 4)) return NULL;
    ms->last = NULL;
    struct lmon *x = &ms->v[ms->n];
    memset(x, 0, sizeof(*x));
    x->pid = pid;
    x->seen = calloc((size_t)ms->sp->nas + 1, sizeof(*x->seen));
    if (!x->seen || tkp_mon_new(ms->sp, &x->m)) {
        lmon_free(x);
        return NULL;
    }
    ms->n++;
    return ms->last = x;
}

/* Reports the violations judged since the last look. The monitor keeps the first `witness`
 * violations of an assertion in full (monitor.h); once one is reported here its slot is handed
 * back, so every violation of a days-long follow is reported with its witness in the same
 * bounded memory. */
static void report_new(struct tkp_live_mons *ms, struct lmon *x)
{
    for (int a = 0; a < ms->sp->nas; a++) {
        struct tkp_ares *R = (struct tkp_ares *)tkp_mon_result(x->m, a);
        if (R->violations == x->seen[a]) continue;
        uint64_t n = R->violations - x->seen[a];
        x->seen[a] = R->violations;
        for (int k = 0; k < R->nfirst; k++)
            if (ms->on_viol) ms->on_viol(ms->arg, x->pid, ms->sp, a, &R->first[k], 1);
        /* more in one record than the slots kept them (TKP_LIVE_WITNESS): counted, not shown */
        if (n > (uint64_t)R->nfirst && ms->on_viol)
            ms->on_viol(ms->arg, x->pid, ms->sp, a, NULL, n - (uint64_t)R->nfirst);
        R->nfirst = 0;
        R->nworst = 0;
    }
}

int tkp_live_mons_feed(struct tkp_live_mons *ms, const struct tkp_record *rec)
{
    struct lmon *x = mon_of(ms, rec->pid, 1);
    if (!x) return TKP_ERR_NOMEM;
    if (x->finished) return 0;
    int rc = tkp_mon_feed(x->m, rec);
    if (rc < 0) return rc;
    report_new(ms, x);
    return 0;
}

int tkp_live_mons_exited(struct tkp_live_mons *ms, uint64_t pid)
{
    struct lmon *x = mon_of(ms, pid, 0);
    if (!x || x->finished) return 0;
    x->finished = 1;
    int rc = tkp_mon_finish(x->m);
    report_new(ms, x);
    return rc < 0 ? rc : 0;
}

uint64_t tkp_live_mons_violations(void *arg, uint64_t pid, int as)
{
    struct tkp_live_mons *ms = arg;
    struct lmon *x = ms ? mon_of(ms, pid, 0) : NULL;
    return x ? tkp_mon_result(x->m, as)->violations : 0;
}

uint64_t tkp_live_mons_errors(const struct tkp_live_mons *ms)
{
    uint64_t n = 0;
    for (size_t i = 0; ms && i < ms->n; i++)
        for (int a = 0; a < ms->sp->nas; a++)
            if (!ms->sp->as[a].warn) n += tkp_mon_result(ms->v[i].m, a)->violations;
    return n;
}

void tkp_live_mons_forget(struct tkp_live_mons *ms, uint64_t pid)
{
    for (size_t i = 0; ms && i < ms->n; i++) {
        if (ms->v[i].pid != pid) continue;
        lmon_free(&ms->v[i]);
        ms->v[i] = ms->v[--ms->n];
        ms->last = NULL;
        return;
    }
}

int tkp_live_load_spec(struct tkp_ctx *ctx, const char *path, struct tkp_spec **sp)
{
    FILE *f = fopen(path, "rb");
    *sp = NULL;
    if (!f) return tkp_cmd_fail(ctx, TKP_ERR_IO, "%s: %s", path, strerror(errno));
    char *text = malloc((1u << 20) + 1);
    size_t n = text ? fread(text, 1, 1u << 20, f) : 0;
    fclose(f);
    if (!text) return tkp_cmd_fail(ctx, TKP_ERR_NOMEM, "out of memory");
    text[n] = 0;
    struct tkp_spec_err e;
    int rc = tkp_spec_parse(text, path, sp, &e); /* the spec owns text from here */
    if (!rc) rc = tkp_spec_compile(*sp, &e);
    if (rc == TKP_ERR_NOMEM) return tkp_cmd_fail(ctx, rc, "out of memory");
    if (rc)
        return tkp_cmd_fail(ctx, TKP_ERR_SPEC,
                            "%s:%u:%u: %s (tokprof check --explain %s "
                            "shows more)",
                            path, e.line, e.col, e.msg, path);
    for (int a = 0; a < (*sp)->nas; a++)
        if ((*sp)->as[a].level == LV_RUN)
            return tkp_cmd_fail(ctx, TKP_ERR_USAGE,
                                "%s:%u: assertion '%s' is over the whole run: "
                                "a live follow checks step and record assertions only (run "
                                "percentiles would keep every step; check the capture afterwards)",
                                path, (*sp)->as[a].line, (*sp)->as[a].id);
    /* the monitor keeps the first `witness` violations in full; live they are reported and
     * their slots handed back at each record, so this bounds the violations one record (or the
     * close of one step) can show in full */
    for (int a = 0; a < (*sp)->nas; a++)
        if ((*sp)->as[a].witness < TKP_LIVE_WITNESS) (*sp)->as[a].witness = TKP_LIVE_WITNESS;
    if ((*sp)->uses_base)
        return tkp_cmd_fail(ctx, TKP_ERR_USAGE, "%s: baseline(...) is not available live", path);
    return 0;
}

int tkp_live_spec_nas(const struct tkp_spec *sp)
{
    return sp->nas;
}

const char *tkp_live_spec_id(const struct tkp_spec *sp, int as, int *warn)
{
    *warn = sp->as[as].warn;
    return sp->as[as].id;
}

void tkp_live_spec_free(struct tkp_spec *sp)
{
    tkp_spec_free(sp);
}
