/* tokprof whatif: the inter-token latency a change would give, from one capture — the step
 * dependency model (model/critpath.h) replayed with changed costs, against what was observed.
 *
 * JSON keys (`--json`): change {scale [{match, factor}], host, launch_ns, graphs, graph_ns (the
 * replay cost used), graph_ns_from ("given", "capture": measured, "default"), graphs_end},
 * token_steps (ITL intervals compared), unpredicted (intervals left out) and why {no_gpu,
 * no_event, open}, tokens_known, latency_ns (the launch latency the model used),
 * observed {itl_ns {p50, p90, p99, mean}, tokens_per_s}, predicted {the same} (null when no
 * interval could be predicted), per_step {host_ns, wait_ns, gpu_ns} each {observed, predicted}
 * (means over the compared steps: host running, host blocked in syncs, GPU time), bound (the
 * observed run's verdict, figures.h's one rule over the token steps: "gpu-bound",
 * "launch-bound", "host-bound", "unknown"; the word summary says), and with --per-step: steps
 * [{thread, seg, index, observed_ns, predicted_ns, why}]. */
#include <inttypes.h>
#include <math.h>
#include <regex.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/json.h"
#include "capture/reader.h"
#include "cmd/cmd.h"
#include "cmd/whatif.h"
#include "model/analysis.h"
#include "model/classes.h"
#include "model/critpath.h"
#include "model/model.h"

#define SCALES_MAX 16

struct scale {
    char match[256]; /* the argument's left side */
    int cls;           /* a class id, or -1: a regex */
    regex_t re;
    double f;
};

struct opts {
    const char *path, *classes;
    int json, per_step;
    struct tkp_crit_change ch;
    struct scale sc[SCALES_MAX];
    const char *sc_arg[SCALES_MAX];
    int nsc;
    const struct tkp_classes *cl;
    const char *opt; /* the option's name in messages (NULL: --scale) */
    const char *gend; /* --graphs-end: where a step's graph ends ("" none: the whole step) */
    int gend_cls;     /* its class id, -1: a regex, -2: none */
    regex_t gend_re;
    uint64_t graph_used; /* the per-replay cost the replay used, and whether it was measured */
    int graph_measured;
};

/* --graphs-end: whether a kernel name ends a step's captured part. */
static int graph_end_of(void *arg, const char *name)
{
    const struct opts *o = arg;
    if (o->gend_cls >= 0) return tkp_classes_match(o->cl, name) == o->gend_cls;
    return !regexec(&o->gend_re, name, 0, NULL, 0);
}

static int parse_factor(struct tkp_ctx *ctx, const char *name, const char *v, double *f)
{
    char *end;
    double x = strtod(v, &end);
    if (end == v || *end || !(x >= 0) || x > 1e6)
        return tkp_cmd_fail(ctx, TKP_ERR_USAGE, "%s: '%s' is not a factor (a number >= 0)", name, v);
    *f = x;
    return 0;
}

static int opt_scale(struct tkp_ctx *ctx, const char *name, const char *v, void *dst)
{
    struct opts *o = dst;
    if (o->nsc == SCALES_MAX)
        return tkp_cmd_fail(ctx, TKP_ERR_USAGE, "%s: at most %d", name, SCALES_MAX);
    if (!strchr(v, '=') || strrchr(v, '=') == v)
        return tkp_cmd_fail(ctx, TKP_ERR_USAGE, "%s: '%s' is not CLASS_OR_REGEX=FACTOR", name, v);
    o->sc_arg[o->nsc++] = v;
    return 0;
}

static int opt_host(struct tkp_ctx *ctx, const char *name, const char *v, void *dst)
{
    return parse_factor(ctx, name, v, dst);
}

/* The factor of a kernel name: the first --scale that matches it (class or regex), else 1. */
static double scale_of(void *arg, const char *name)
{
    const struct opts *o = arg;
    int cls = -2;
    for (int i = 0; i < o->nsc; i++) {
        const struct scale *s = &o->sc[i];
        if (s->cls >= 0) {
            if (cls == -2) cls = tkp_classes_match(o->cl, name);
            if (cls == s->cls) return s->f;
        } else if (!regexec(&s->re, name, 0, NULL, 0)) {
            return s->f;
        }
    }
    return 1;
}

/* The --scale arguments, once the classes are known: a class name, else a regex. */
static int compile_scales(struct tkp_ctx *ctx, struct opts *o)
{
    for (int i = 0; i < o->nsc; i++) {
        struct scale *s = &o->sc[i];
        const char *eq = strrchr(o->sc_arg[i], '=');
        size_t n = (size_t)(eq - o->sc_arg[i]);
        s->cls = -3; /* nothing to free */
        if (n >= sizeof(s->match))
            return tkp_cmd_fail(ctx, TKP_ERR_USAGE, "%s: '%s' is too long",
                                o->opt ? o->opt : "--scale", o->sc_arg[i]);
        memcpy(s->match, o->sc_arg[i], n);
        s->match[n] = 0;
        const char *name = o->opt ? o->opt : "--scale";
        int err = parse_factor(ctx, name, eq + 1, &s->f);
        if (err) return err;
        s->cls = tkp_classes_find(o->cl, s->match);
        if (s->cls < 0 && regcomp(&s->re, s->match, REG_EXTENDED | REG_NOSUB | REG_ICASE)) {
            s->cls = -3;
            return tkp_cmd_fail(ctx, TKP_ERR_USAGE, "%s: '%s' is neither a kernel class nor a regex",
                                name, s->match);
        }
    }
    return 0;
}

static void free_scales(struct opts *o)
{
    for (int i = 0; i < o->nsc; i++)
        if (o->sc[i].cls == -1) regfree(&o->sc[i].re);
}

struct tkp_whatif_rule {
    struct opts o;
};

int tkp_whatif_rule_new(struct tkp_ctx *ctx, const struct tkp_classes *cl, const char *opt,
                        const char *arg, struct tkp_crit_change *ch, struct tkp_whatif_rule **out)
{
    struct tkp_whatif_rule *r = calloc(1, sizeof(*r));
    if (!r) return tkp_cmd_fail(ctx, TKP_ERR_NOMEM, "out of memory");
    r->o.cl = cl, r->o.opt = opt;
    int err = opt_scale(ctx, opt, arg, &r->o);
    if (!err) err = compile_scales(ctx, &r->o);
    if (err) {
        tkp_whatif_rule_free(r);
        return err;
    }
    ch->scale = scale_of, ch->scale_arg = &r->o;
    *out = r;
    return 0;
}

void tkp_whatif_rule_free(struct tkp_whatif_rule *r)
{
    if (!r) return;
    free_scales(&r->o);
    free(r);
}

struct figures {
    uint64_t p50, p90, p99, mean;
    double tps;
};

/* Nearest-rank percentiles of v (sorted here) and tokens/s over their sum. */
static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static uint64_t rank(const uint64_t *v, size_t n, double q)
{
    size_t k = (size_t)ceil(q * (double)n);
    return v[k ? k - 1 : 0];
}

static void figures(uint64_t *v, size_t n, uint64_t tokens, struct figures *f)
{
    uint64_t sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += v[i];
    qsort(v, n, sizeof(*v), cmp_u64);
    f->p50 = rank(v, n, 0.50), f->p90 = rank(v, n, 0.90), f->p99 = rank(v, n, 0.99);
    f->mean = sum / n;
    f->tps = sum ? (double)tokens * 1e9 / (double)sum : 0;
}

struct result {
    size_t n, skipped, why_gpu, why_event, why_open;
    uint64_t tokens;
    int tokens_known;
    struct figures obs, pred;
    double host_o, host_p, wait_o, wait_p, gpu_o, gpu_p; /* means per compared step */
    struct tkp_verdict v; /* the observed run's (figures.h) */
};

static const char *why_str(uint32_t w)
{
    return w & TKP_CRIT_NO_GPU ? "no GPU record" : w & TKP_CRIT_NO_EVENT ? "unknown dependency"
                                                                        : "no STEP record";
}

/* The ITL intervals: consecutive token steps of a thread, both ends observed; compared when
 * both ends were predicted. */
static int compute(const struct opts *o, const struct tkp_model *m, const struct tkp_acc *a,
                   const struct tkp_crit_step *s, size_t ns, struct result *res, FILE *per)
{
    uint64_t *tok = calloc(m->nsteps + 1, sizeof(*tok));
    int *src = calloc(m->nsteps + 1, sizeof(*src));
    uint64_t *vo = malloc((ns + 1) * sizeof(*vo)), *vp = malloc((ns + 1) * sizeof(*vp));
    if (!tok || !src || !vo || !vp) return free(tok), free(src), free(vo), free(vp), TKP_ERR_NOMEM;
    tkp_step_tokens(m, a, tok, src);
    memset(res, 0, sizeof(*res));
    res->tokens_known = 1;
    int first = 1;
    for (size_t i = 1; i < ns; i++) {
        const struct tkp_crit_step *p = &s[i - 1], *c = &s[i];
        if (!c->token || !p->token || p->thread != c->thread || !c->obs_end || !p->obs_end)
            continue;
        uint32_t why = (c->why | p->why) & ~0u;
        const struct tkp_mstep *ms = tkp_model_step(m, c->thread, c->seg);
        uint64_t t = ms ? tok[ms - m->steps] : 0;
        if (per) {
            fprintf(per, first ? "" : ",");
            fprintf(per, "{\"thread\":%" PRIu32 ",\"seg\":%" PRIu64 ",\"index\":%" PRId64
                         ",\"observed_ns\":%" PRIu64 ",\"predicted_ns\":",
                    c->thread, c->seg, ms ? ms->index : -1, c->obs_end - p->obs_end);
            if (why) fprintf(per, "null,\"why\":\"%s\"}", why_str(why));
            else fprintf(per, "%" PRId64 ",\"why\":null}", (int64_t)(c->pred_end - p->pred_end));
            first = 0;
        }
        if (why) {
            res->skipped++;
            res->why_gpu += !!(why & TKP_CRIT_NO_GPU);
            res->why_event += !!(why & TKP_CRIT_NO_EVENT);
            res->why_open += !!(why & TKP_CRIT_OPEN);
            continue;
        }
        if (!t) res->tokens_known = 0, t = 1;
        res->tokens += t;
        vo[res->n] = c->obs_end - p->obs_end;
        vp[res->n] = c->pred_end > p->pred_end ? c->pred_end - p->pred_end : 0;
        res->host_o += (double)c->obs_host, res->host_p += (double)c->pred_host;
        res->wait_o += (double)c->obs_wait, res->wait_p += (double)c->pred_wait;
        res->gpu_o += (double)c->obs_gpu, res->gpu_p += (double)c->pred_gpu;
        res->n++;
    }
    (void)o;
    if (res->n) {
        double n = (double)res->n;
        res->host_o /= n, res->host_p /= n, res->wait_o /= n, res->wait_p /= n;
        res->gpu_o /= n, res->gpu_p /= n;
        figures(vo, res->n, res->tokens, &res->obs);
        figures(vp, res->n, res->tokens, &res->pred);
    }
    free(tok), free(src), free(vo), free(vp);
    return 0;
}

static void json_figures(FILE *f, const char *key, const struct figures *x)
{
    fprintf(f,
            "\"%s\":{\"itl_ns\":{\"p50\":%" PRIu64 ",\"p90\":%" PRIu64 ",\"p99\":%" PRIu64
            ",\"mean\":%" PRIu64 "},\"tokens_per_s\":%.3f}",
            key, x->p50, x->p90, x->p99, x->mean, x->tps);
}

static double pct(double pred, double obs)
{
    return obs > 0 ? (pred - obs) * 100.0 / obs : 0;
}

static void print_text(FILE *f, const struct opts *o, const struct result *r, uint64_t lat)
{
    fprintf(f, "change    ");
    for (int i = 0; i < o->nsc; i++)
        fprintf(f, "%s x%g  ", o->sc[i].match, o->sc[i].f);
    if (o->ch.host != 1) fprintf(f, "host x%g  ", o->ch.host);
    if (o->ch.launch_ns >= 0) fprintf(f, "launch %" PRId64 " ns  ", o->ch.launch_ns);
    if (o->ch.graphs)
        fprintf(f, "graphs (%" PRIu64 " ns a replay, %s; eager %s the step's last %s)  ",
                o->graph_used, o->ch.graph_ns ? "given" : o->graph_measured ? "measured" : "default",
                o->ch.graph_end_before ? "from" : "after",
                !o->ch.graph_end ? "launch: none"
                : o->ch.graph_end_before ? o->gend + 7 : o->gend);
    if (!o->nsc && o->ch.host == 1 && o->ch.launch_ns < 0 && !o->ch.graphs) fprintf(f, "none");
    fprintf(f, "\nsteps     %zu token intervals compared", r->n);
    if (r->skipped)
        fprintf(f, ", %zu not predictable (%zu no GPU record, %zu unknown dependency, %zu cut)",
                r->skipped, r->why_gpu, r->why_event, r->why_open);
    fprintf(f, "; launch latency %.1f us\n", (double)lat / 1e3);
    if (!r->n) {
        fputs("no prediction: every token interval lacks what the model needs (above)\n", f);
        return;
    }
    fprintf(f, "\n%-10s %12s %12s %12s %12s\n", "ITL", "p50 us", "p90 us", "p99 us", "tokens/s");
    const struct figures *x[2] = {&r->obs, &r->pred};
    const char *lbl[2] = {"observed", "predicted"};
    for (int k = 0; k < 2; k++)
        fprintf(f, "%-10s %12.1f %12.1f %12.1f %12.1f\n", lbl[k], (double)x[k]->p50 / 1e3,
                (double)x[k]->p90 / 1e3, (double)x[k]->p99 / 1e3, x[k]->tps);
    fprintf(f, "%-10s %+11.1f%% %+11.1f%% %+11.1f%% %+11.1f%%\n", "change",
            pct((double)r->pred.p50, (double)r->obs.p50), pct((double)r->pred.p90, (double)r->obs.p90),
            pct((double)r->pred.p99, (double)r->obs.p99), pct(r->pred.tps, r->obs.tps));
    fprintf(f, "\nper step (mean)   observed us  predicted us\n");
    fprintf(f, "host running      %11.1f  %12.1f\n", r->host_o / 1e3, r->host_p / 1e3);
    fprintf(f, "host waiting GPU  %11.1f  %12.1f\n", r->wait_o / 1e3, r->wait_p / 1e3);
    fprintf(f, "GPU time          %11.1f  %12.1f\n", r->gpu_o / 1e3, r->gpu_p / 1e3);
    char vt[256];
    tkp_verdict_text(&r->v, vt, sizeof(vt));
    fprintf(f, "\ncritical path: %s; ", vt);
    double dh = r->host_p - r->host_o, dw = r->wait_p - r->wait_o;
    fprintf(f, "what moved per step: host %+.1f us, waits on the GPU %+.1f us", dh / 1e3, dw / 1e3);
    if (r->gpu_p != r->gpu_o && fabs(dw) < 0.1 * fabs(r->gpu_p - r->gpu_o))
        fprintf(f, " (GPU time %+.1f us hidden behind the host)", (r->gpu_p - r->gpu_o) / 1e3);
    fputc('\n', f);
}

static int run(int argc, char **argv, struct tkp_ctx *ctx)
{
    struct opts o;
    memset(&o, 0, sizeof(o));
    tkp_crit_change_init(&o.ch);
    uint64_t launch_ns = UINT64_MAX, graph_ns = 0;
    o.gend = "before:gemm";
    const struct tkp_opt opts[] = {
        {"--json", 'f', &o.json, 0, NULL, NULL},
        {"--per-step", 'f', &o.per_step, 0, NULL, NULL},
        {"--classes", 's', &o.classes, 0, NULL, NULL},
        {"--scale", 'c', &o, 0, "--scale needs CLASS_OR_REGEX=FACTOR", opt_scale},
        {"--host", 'c', &o.ch.host, 0, "--host needs a factor", opt_host},
        {"--launch-ns", 'u', &launch_ns, 1000000000, NULL, NULL},
        {"--graphs", 'f', &o.ch.graphs, 0, NULL, NULL},
        {"--graph-ns", 'u', &graph_ns, 1000000000, NULL, NULL},
        {"--graphs-end", 's', &o.gend, 0, NULL, NULL},
    };
    int err = tkp_cmd_parse(ctx, argc, argv, opts, sizeof(opts) / sizeof(*opts), &o.path);
    if (err) return err;
    if (launch_ns != UINT64_MAX) o.ch.launch_ns = (int64_t)launch_ns;
    o.ch.graph_ns = graph_ns;
    struct tkp_classes *cl;
    if ((err = tkp_cmd_classes(ctx, o.classes, &cl))) return err;
    o.cl = cl;
    if ((err = compile_scales(ctx, &o))) {
        free_scales(&o);
        tkp_classes_free(cl);
        return err;
    }
    if (o.nsc) o.ch.scale = scale_of;
    o.ch.scale_arg = &o;
    o.gend_cls = -2;
    if (o.ch.graphs && *o.gend && strcmp(o.gend, "none")) {
        const char *g = o.gend;
        if (!strncmp(g, "before:", 7)) g += 7, o.ch.graph_end_before = 1;
        o.gend_cls = *g ? tkp_classes_find(cl, g) : -2;
        if (o.gend_cls < 0 && (!*g || regcomp(&o.gend_re, g, REG_EXTENDED | REG_NOSUB | REG_ICASE))) {
            o.gend_cls = -2;
            err = tkp_cmd_fail(ctx, TKP_ERR_USAGE, "--graphs-end: '%s' is neither a kernel class nor a regex",
                               o.gend);
            free_scales(&o);
            tkp_classes_free(cl);
            return err;
        }
        if (o.gend_cls < 0) o.gend_cls = -1;
        o.ch.graph_end = graph_end_of;
    }

    struct tkp_reader *r;
    struct tkp_record rec;
    struct tkp_model m;
    struct tkp_model_opts mo = {.classes = cl, .from = 0, .to = -1};
    struct tkp_acc *a = NULL;
    struct tkp_crit *c = NULL;
    if ((err = tkp_cmd_open(ctx, o.path, &r))) goto out_scales;
    tkp_model_init(&m, &mo);
    if (!(err = tkp_acc_bind(&m, &a)) && !(err = tkp_crit_new(&o.ch, &c))) {
        while (!err && tkp_reader_next(r, &rec) == 1)
            if (!(err = tkp_model_add(&m, &rec))) err = tkp_crit_add(c, &rec);
        if (!err) err = tkp_model_finish(&m);
        if (!err) err = tkp_crit_finish(c);
    }
    if (err) {
        tkp_cmd_fail(ctx, err, "%s: %s", o.path, tkp_strerror(err));
        goto out;
    }
    tkp_cmd_warn_reader(ctx, o.path, r);
    size_t ns;
    const struct tkp_crit_step *s = tkp_crit_steps(c, &ns);
    struct result res;
    FILE *f = ctx->out;
    if (o.json) {
        fprintf(f, "{");
        if (o.per_step) fprintf(f, "\"steps\":[");
    }
    if ((err = compute(&o, &m, a, s, ns, &res, o.json && o.per_step ? f : NULL))) {
        tkp_cmd_fail(ctx, err, "out of memory");
        goto out;
    }
    struct tkp_split sp; /* the verdict: the observed run's, as summary says it */
    tkp_model_split(&m, &sp);
    tkp_verdict_make(&sp, &res.v);
    uint64_t lat = tkp_crit_latency_ns(c);
    o.graph_used = tkp_crit_graph_ns(c, &o.graph_measured);
    size_t graphed, whole = tkp_crit_graph_whole(c, &graphed);
    if (whole)
        ctx->warn(ctx, "--graphs-end '%s' matched no launch in %zu of %zu token steps: those "
                  "replayed whole", o.gend, whole, graphed);
    if (o.json) {
        if (o.per_step) fprintf(f, "],");
        fprintf(f, "\"change\":{\"scale\":[");
        for (int i = 0; i < o.nsc; i++)
            fprintf(f, "%s{\"match\":\"%s\",\"factor\":%g}", i ? "," : "", o.sc[i].match, o.sc[i].f);
        fprintf(f, "],\"host\":%g,\"launch_ns\":", o.ch.host);
        if (o.ch.launch_ns >= 0) fprintf(f, "%" PRId64, o.ch.launch_ns);
        else fprintf(f, "null");
        fprintf(f, ",\"graphs\":%s,\"graph_ns\":%" PRIu64 ",\"graph_ns_from\":\"%s\",\"graphs_end\":",
                o.ch.graphs ? "true" : "false", o.graph_used,
                o.ch.graph_ns ? "given" : o.graph_measured ? "capture" : "default");
        if (o.ch.graph_end) tkp_json_str(f, o.gend);
        else fprintf(f, "null");
        if (o.ch.graph_end) fprintf(f, ",\"graphs_end_missed\":%zu", whole);
        fprintf(f, "},");
        fprintf(f,
                "\"token_steps\":%zu,\"unpredicted\":%zu,\"why\":{\"no_gpu\":%zu,\"no_event\":%zu,"
                "\"open\":%zu},\"tokens_known\":%s,\"latency_ns\":%" PRIu64 ",",
                res.n, res.skipped, res.why_gpu, res.why_event, res.why_open,
                res.tokens_known ? "true" : "false", lat);
        if (res.n) {
            json_figures(f, "observed", &res.obs);
            fputc(',', f);
            json_figures(f, "predicted", &res.pred);
            fprintf(f,
                    ",\"per_step\":{\"host_ns\":{\"observed\":%.0f,\"predicted\":%.0f},"
                    "\"wait_ns\":{\"observed\":%.0f,\"predicted\":%.0f},"
                    "\"gpu_ns\":{\"observed\":%.0f,\"predicted\":%.0f}},\"bound\":\"%s\"}\n",
                    res.host_o, res.host_p, res.wait_o, res.wait_p, res.gpu_o, res.gpu_p,
                    res.v.word);
        } else {
            fprintf(f, "\"observed\":null,\"predicted\":null,\"bound\":\"%s\"}\n", res.v.word);
        }
    } else {
        print_text(f, &o, &res, lat);
    }
out:
    tkp_crit_free(c);
    tkp_acc_free(a);
    tkp_model_free(&m);
    tkp_reader_close(r);
out_scales:
    if (o.gend_cls == -1) regfree(&o.gend_re);
    free_scales(&o);
    tkp_classes_free(cl);
    return err;
}

const struct tkp_cmd tkp_cmd_whatif = {
    .name = "whatif",
    .brief = "predict inter-token latency under a change (a kernel class faster, the host faster, graphs)",
    .usage =
        "usage: tokprof whatif [--scale CLASS_OR_REGEX=F]... [--host F] [--launch-ns N]\n"
        "                      [--graphs [--graph-ns N] [--graphs-end CLASS_OR_REGEX]]\n"
        "                      [--per-step] [--json] [--classes FILE]\n"
        "                      CAPTURE...\n"
        "\n"
        "Replays every step of the capture through its dependencies with changed costs and\n"
        "prints the inter-token latency (ITL: the time between a thread's consecutive token\n"
        "steps' ends) observed and predicted, p50/p90/p99, and tokens/s, over the same steps.\n"
        "The model: the host runs its segments between API calls (the times it recorded), each\n"
        "launch goes on its stream in order and starts at max(call + launch latency, the stream's\n"
        "tail) for its recorded GPU duration, events and stream waits order streams, a sync or a\n"
        "blocking copy makes the host wait for its stream or event, a graph replay runs its\n"
        "recorded nodes by their dependencies. What the capture cannot explain (a kernel's jitter,\n"
        "a sync's wake-up) is kept as it was, so with no change the prediction is the observation.\n"
        "Needs GPU records (TOKPROF_GPU=always; the default times 2 steps of 20): a step whose\n"
        "critical path lacks one is counted as not predictable, never guessed.\n"
        "\n"
        "  --scale CLASS_OR_REGEX=F  GPU durations x F for a kernel class (attention, gemm, ...:\n"
        "                   tokprof kernels shows them) or kernel names matching an extended\n"
        "                   regex (case-insensitive); repeatable, the first match wins\n"
        "  --host F         host segments x F (the scheduler, Python); each launch call's own\n"
        "                   cost stays (--launch-ns sets it)\n"
        "  --launch-ns N    each launch's host cost (the smallest gap between two launches seen)\n"
        "                   replaced by N ns\n"
        "  --graphs         each step's eager launches, up to its last --graphs-end launch, as\n"
        "                   one CUDA graph replay: one host cost at its first launch, the rest\n"
        "                   free and its kernels back to back on the GPU; later launches (lm_head,\n"
        "                   sampling) stay eager, as vLLM and minillm --graphs keep them\n"
        "  --graph-ns N     the replay's host cost; default: measured (the median gap after a\n"
        "                   cudaGraphLaunch in the capture), 10000 when the capture has none\n"
        "  --graphs-end [before:]CLASS_OR_REGEX  where a step's graph ends: at its last launch\n"
        "                   of that class or name regex (norm: the forward's final norm kernel),\n"
        "                   or with before: just before its last run of them (default\n"
        "                   before:gemm: lm_head and what follows stay eager, however many\n"
        "                   kernels the final norm took); none: the whole step. Steps with no\n"
        "                   such launch are replayed whole, counted in a warning and in\n"
        "                   --json's change.graphs_end_missed\n"
        "  --per-step       with --json: every token interval, observed and predicted (or why not)\n"
        "  --json           one JSON object: observed / predicted {itl_ns {p50, p90, p99, mean},\n"
        "                   tokens_per_s}, per_step means, bound\n"
        "  --classes FILE   extra 'CLASS REGEX' lines, tried before the built-in classes\n"
        "\n"
        "Reading it: the critical path line is summary's verdict (README \"Verdict\"): when the\n"
        "host waited on the GPU for little of the step (host- or launch-bound), a faster GPU\n"
        "moves nothing and --host or --launch-ns does; the 'what moved' line says which.\n"
        "\n"
        "example: would FlashAttention twice as fast help, and would a faster scheduler?\n"
        "  tokprof whatif --scale attention=0.5 server.1234.tokprof\n"
        "  tokprof whatif --host 0.5 --json server.1234.tokprof | jq .predicted\n",
    .run = run,
};
