/* tokprof decoder: helpers shared by the subcommands (see cmd.h). */
#include "cmd/cmd.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model/classes.h"
#include "base/err.h"
#include "base/json.h"
#include "capture/multireader.h"
#include "capture/reader.h"
#include "model/analysis.h"
#include "model/columns.h"
#include "model/model.h"

int tkp_cmd_fail(struct tkp_ctx *ctx, int err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ctx->why, sizeof(ctx->why), fmt, ap);
    va_end(ap);
    return err;
}

int tkp_cmd_num(struct tkp_ctx *ctx, const char *opt, const char *v, uint64_t max, uint64_t *out)
{
    char *end;
    if (!v) return tkp_cmd_fail(ctx, TKP_ERR_USAGE, "%s needs a value", opt);
    unsigned long long x = strtoull(v, &end, 10);
    if (end == v || *end || v[0] == '-' || x > max)
        return tkp_cmd_fail(ctx, TKP_ERR_USAGE, "%s: '%s' is not a number", opt, v);
    *out = x;
    return 0;
}

int tkp_cmd_classes(struct tkp_ctx *ctx, const char *path, struct tkp_classes **cl)
{
    char why[256];
    int err = tkp_classes_new(path, cl, why, sizeof(why));
    if (err) return tkp_cmd_fail(ctx, err, "%s", err == TKP_ERR_NOMEM ? "out of memory" : why);
    return 0;
}

int tkp_cmd_input(struct tkp_ctx *ctx, const char **first, const char *arg)
{
    if (ctx->ninputs == TKP_CMD_INPUTS_MAX)
        return tkp_cmd_fail(ctx, TKP_ERR_USAGE, "more than %d capture arguments (give a directory)",
                            TKP_CMD_INPUTS_MAX);
    if (!*first) *first = arg;
    ctx->inputs[ctx->ninputs++] = arg;
    return 0;
}

/* Where parse() puts the arguments that are not options. */
struct pos {
    int mode;          /* CAPTURES (tkp_cmd_input), ARGS (into args), CMDLINE (stop at one) */
    const char **path; /* CAPTURES: the first */
    const char **args; /* ARGS */
    size_t max, n;
    int first; /* CMDLINE: the index of the first, argc when none */
};
enum { CAPTURES, ARGS, CMDLINE };

static int positional(struct tkp_ctx *ctx, struct pos *p, const char *a)
{
    if (p->mode == CAPTURES) return tkp_cmd_input(ctx, p->path, a);
    if (p->n == p->max) return tkp_cmd_fail(ctx, TKP_ERR_USAGE, "too many arguments ('%s')", a);
    p->args[p->n++] = a;
    return 0;
}

/* One option argument a (argv[*i]), its value taken from '=' or argv[*i + 1]. */
static int option(struct tkp_ctx *ctx, char **argv, int *i, const struct tkp_opt *opts, size_t n)
{
    const char *a = argv[*i], *eq = a[1] == '-' ? strchr(a, '=') : NULL, *v;
    size_t len = eq ? (size_t)(eq - a) : strlen(a);
    const struct tkp_opt *o = NULL;
    for (size_t k = 0; !o && k < n; k++)
        if (!strncmp(a, opts[k].name, len) && !opts[k].name[len]) o = &opts[k];
    if (!o) return tkp_cmd_fail(ctx, TKP_ERR_USAGE, "unknown option '%s'", a);
    if (o->kind == 'f') {
        if (eq) return tkp_cmd_fail(ctx, TKP_ERR_USAGE, "%s takes no value", o->name);
        *(int *)o->dst = 1;
        return 0;
    }
    if (!(v = eq ? eq + 1 : argv[++*i])) /* argv[argc] is NULL */
        return o->needs ? tkp_cmd_fail(ctx, TKP_ERR_USAGE, "%s", o->needs)
                        : tkp_cmd_fail(ctx, TKP_ERR_USAGE, "%s needs a value", o->name);
    if (o->kind == 'u') return tkp_cmd_num(ctx, o->name, v, o->max, o->dst);
    if (o->kind == 'c') return o->fn(ctx, o->name, v, o->dst);
    *(const char **)o->dst = v;
    return 0;
}

static int parse(struct tkp_ctx *ctx, int argc, char **argv, const struct tkp_opt *opts, size_t n,
                 struct pos *p)
{
    int err, ended = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (ended || a[0] != '-' || !a[1]) {
            if (p->mode == CMDLINE) {
                p->first = i;
                return 0;
            }
            if ((err = positional(ctx, p, a))) return err;
        } else if (!strcmp(a, "--")) {
            ended = 1;
        } else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            ctx->help = 1;
            return tkp_cmd_fail(ctx, TKP_ERR_USAGE, "%s", a);
        } else if ((err = option(ctx, argv, &i, opts, n))) {
            return err;
        }
    }
    p->first = argc;
    return 0;
}

int tkp_cmd_parse(struct tkp_ctx *ctx, int argc, char **argv, const struct tkp_opt *opts, size_t n,
                  const char **path)
{
    struct pos p = {.mode = CAPTURES, .path = path};
    int err;
    *path = NULL;
    if ((err = parse(ctx, argc, argv, opts, n, &p))) return err;
    if (!*path) return tkp_cmd_fail(ctx, TKP_ERR_USAGE, "no capture file given");
    return 0;
}

int tkp_cmd_parse_args(struct tkp_ctx *ctx, int argc, char **argv, const struct tkp_opt *opts,
                       size_t n, const char **args, size_t max, size_t *nargs)
{
    struct pos p = {.mode = ARGS, .args = args, .max = max};
    int err = parse(ctx, argc, argv, opts, n, &p);
    *nargs = p.n;
    return err;
}

int tkp_cmd_parse_cmdline(struct tkp_ctx *ctx, int argc, char **argv, const struct tkp_opt *opts,
                          size_t n, int *first)
{
    struct pos p = {.mode = CMDLINE};
    int err = parse(ctx, argc, argv, opts, n, &p);
    *first = p.first;
    return err;
}

int tkp_cmd_args_json_classes(struct tkp_ctx *ctx, int argc, char **argv, const char **path,
                              int *json, struct tkp_classes **cl)
{
    const char *classes = NULL;
    const struct tkp_opt opts[] = {{"--json", 'f', json, 0, NULL, NULL},
                                   {"--classes", 's', &classes, 0, NULL, NULL}};
    *json = 0;
    int err = tkp_cmd_parse(ctx, argc, argv, opts, 2, path);
    return err ? err : tkp_cmd_classes(ctx, classes, cl);
}

FILE *tkp_cmd_output(struct tkp_ctx *ctx, const char *path, const char *mode)
{
    return strcmp(path, "-") ? fopen(path, mode) : ctx->out;
}

int tkp_cmd_open(struct tkp_ctx *ctx, const char *path, struct tkp_reader **r)
{
    int many = ctx->ninputs > 1 && path == ctx->inputs[0];
    int err = tkp_reader_open_many(many ? ctx->inputs : &path, many ? ctx->ninputs : 1, r,
                                   ctx->why, sizeof(ctx->why));
    return err; /* the reason names the input */
}

static void warn_file(struct tkp_ctx *ctx, const char *path, const struct tkp_reader_err *e,
                      const struct tkp_reader_stats *s);

void tkp_cmd_warn_reader(struct tkp_ctx *ctx, const char *path, const struct tkp_reader *r)
{
    size_t n = tkp_reader_nfiles(r);
    for (size_t i = 0; i < n; i++) {
        const char *p;
        const struct tkp_reader_stats *s;
        const struct tkp_reader_err *e = tkp_reader_file(r, i, &p, &s);
        warn_file(ctx, p ? p : path, e, s);
    }
}

static void warn_file(struct tkp_ctx *ctx, const char *path, const struct tkp_reader_err *e,
                      const struct tkp_reader_stats *s)
{
    if (e && e->code == TKP_ERR_TORN)
        ctx->warn(ctx, "%s: torn tail at byte %llu (%s): decoded up to there", path,
                  (unsigned long long)e->offset, e->msg);
    else if (e)
        ctx->warn(ctx, "%s: bad chunk at byte %llu (%s): decoded up to there", path,
                  (unsigned long long)e->offset, e->msg);
    if (s->missing_names || s->missing_threads)
        ctx->warn(ctx,
                  "%s: %llu name and %llu thread references not defined in their chunk "
                  "(shown as \"?\" and tid 0)",
                  path, (unsigned long long)s->missing_names,
                  (unsigned long long)s->missing_threads);
}

int tkp_cmd_load_model(struct tkp_ctx *ctx, const char *path, struct tkp_model *m)
{
    struct tkp_reader *r;
    struct tkp_record rec;
    int err = tkp_cmd_open(ctx, path, &r);
    if (err) return err;
    while (!err && tkp_reader_next(r, &rec) == 1)
        err = tkp_model_add(m, &rec);
    if (!err) err = tkp_model_finish(m);
    if (err) {
        tkp_reader_close(r);
        return tkp_cmd_fail(ctx, err, "%s: %s", path, tkp_strerror(err));
    }
    tkp_cmd_warn_reader(ctx, path, r);
    tkp_reader_close(r);
    if (m->late)
        ctx->warn(ctx,
                  "%s: %llu GPU records arrived more than %llu ms after their step ended: those "
                  "steps' busy time is approximate",
                  path, (unsigned long long)m->late, (unsigned long long)(m->late_ns / 1000000));
    return 0;
}

int tkp_cmd_load_analysis(struct tkp_ctx *ctx, const char *path, const struct tkp_classes *cl,
                          struct tkp_model *m, struct tkp_acc **a)
{
    struct tkp_model_opts mo = {.classes = cl, .from = 0, .to = -1};
    return tkp_cmd_load_analysis_opts(ctx, path, &mo, m, a);
}

int tkp_cmd_load_analysis_opts(struct tkp_ctx *ctx, const char *path,
                               const struct tkp_model_opts *mo, struct tkp_model *m,
                               struct tkp_acc **a)
{
    struct tkp_reader *r;
    struct tkp_record rec;
    int err = tkp_cmd_open(ctx, path, &r), tty = isatty(2);
    if (err) return err;
    tkp_model_init(m, mo);
    if ((err = tkp_acc_bind(m, a))) {
        tkp_reader_close(r);
        return tkp_cmd_fail(ctx, err, "out of memory");
    }
    uint64_t n = 0;
    while (!err && tkp_reader_next(r, &rec) == 1) {
        err = tkp_model_add(m, &rec);
        if (tty && rec.type == TKP_REC_CHUNK && ++n % 64 == 0)
            fprintf(stderr, "\rtokprof: %s: %llu chunks, %zu steps...", path,
                    (unsigned long long)n, m->nsteps);
    }
    if (tty && n >= 64) fputs("\r\033[K", stderr);
    if (!err) err = tkp_model_finish(m);
    if (err) {
        tkp_reader_close(r);
        tkp_model_free(m);
        tkp_acc_free(*a);
        *a = NULL;
        return tkp_cmd_fail(ctx, err, "%s: %s", path, tkp_strerror(err));
    }
    tkp_cmd_warn_reader(ctx, path, r);
    tkp_reader_close(r);
    return 0;
}

/* A CSV field: as it is, or quoted with its quotes doubled when it needs it (RFC 4180). */
static void csv_str(FILE *f, const char *s)
{
    if (!s[strcspn(s, ",\"\r\n")]) {
        fputs(s, f);
        return;
    }
    putc('"', f);
    for (; *s; s++) {
        if (*s == '"') putc('"', f);
        putc(*s, f);
    }
    putc('"', f);
}

void tkp_cmd_cell(FILE *f, int json, int first, const struct tkp_colspec *c, int has, int64_t v,
                  const char *str)
{
    if (json) fprintf(f, "%s\"%s\":", first ? "" : ",", c->name);
    else if (!first) putc(',', f);
    if (!has) {
        if (json) fputs("null", f);
    } else if (c->type == TKP_CT_STR) {
        if (json) tkp_json_str(f, str);
        else csv_str(f, str);
    } else if (c->type == TKP_CT_F64) {
        fprintf(f, "%.6f", tkp_cell_f64(v));
    } else {
        fprintf(f, "%" PRId64, v); /* every number an int64, as the Arrow tables' */
    }
}
