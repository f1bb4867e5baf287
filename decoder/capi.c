/* tokprof decoder library: the exported C API (tokprof/decoder.h) over the decoder's modules.
 * It stands where main.c stands for the CLI: it makes the command context, collects warnings
 * into a string instead of printing them, and turns tables into Arrow arrays (table.h). Only the
 * functions marked TKP_API are exported from libtokprof_decoder.so; the decoder and the static
 * zstd and msgpack-c inside it stay hidden. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/analysis.h"
#include "cmd/cmd.h"
#include "capture/enums.h"
#include "base/err.h"
#include "model/libcalls.h"
#include "model/model.h"
#include "capture/multireader.h"
#include "views/arrow_table.h"
#include "tokprof/decoder.h"
#include "tokprof/tokprof.h"

#define TKP_API __attribute__((visibility("default")))

/* A command context whose warnings go to a string. */
struct actx {
    struct tkp_ctx ctx; /* first: the warn callback gets &ctx */
    char *warn;
    size_t warn_len;
    FILE *wf;
};

static void warn_collect(struct tkp_ctx *ctx, const char *fmt, ...)
{
    struct actx *a = (struct actx *)ctx;
    va_list ap;
    if (!a->wf && !(a->wf = open_memstream(&a->warn, &a->warn_len))) return;
    va_start(ap, fmt);
    vfprintf(a->wf, fmt, ap);
    va_end(ap);
    fputc('\n', a->wf);
}

/* Sets up a context over the paths; 0 or USAGE (too many) with the reason in why. */
static int actx_init(struct actx *a, const char *const *paths, size_t n, char *why, size_t whylen)
{
    memset(a, 0, sizeof(*a));
    a->ctx.warn = warn_collect;
    a->ctx.argv0 = "tokprof";
    if (n == 0) return tkp_why(why, whylen, TKP_ERR_USAGE, "no capture given");
    if (n > TKP_CMD_INPUTS_MAX)
        return tkp_why(why, whylen, TKP_ERR_USAGE, "more than %d captures (give a directory)",
                       TKP_CMD_INPUTS_MAX);
    for (size_t i = 0; i < n; i++) a->ctx.inputs[a->ctx.ninputs++] = paths[i];
    return 0;
}

/* Hands the warnings over (NULL when none) and carries ctx->why into why on failure. */
static int actx_done(struct actx *a, int err, char **warn, char *why, size_t whylen)
{
    if (a->wf) fclose(a->wf);
    if (warn) *warn = a->warn;
    else free(a->warn);
    if (err && why && whylen)
        snprintf(why, whylen, "%s", a->ctx.why[0] ? a->ctx.why : tkp_strerror(err));
    return err;
}

TKP_API const char *tkp_dec_version(void)
{
    return TOKPROF_VERSION_STRING;
}

TKP_API int tkp_dec_probe(const char *const *paths, size_t n, char *why, size_t whylen)
{
    struct tkp_reader *r;
    if (n == 0) return tkp_why(why, whylen, TKP_ERR_USAGE, "no capture given");
    int err = tkp_reader_open_many(paths, n, &r, why, whylen);
    if (!err) tkp_reader_close(r);
    return err;
}

/* The model of the captures and its acc, as `tokprof steps` loads them; counting kernels per
 * class when counts (step_classes' kernels column). */
static int load(struct actx *a, const char *classes, int counts, struct tkp_classes **cl,
                struct tkp_model *m, struct tkp_acc **acc)
{
    int err = tkp_cmd_classes(&a->ctx, classes, cl);
    if (err) return err;
    struct tkp_model_opts mo = {.classes = *cl, .from = 0, .to = -1, .class_counts = counts};
    if ((err = tkp_cmd_load_analysis_opts(&a->ctx, a->ctx.inputs[0], &mo, m, acc)))
        tkp_classes_free(*cl);
    return err;
}

/* moe: the library-call model of one process's captures (experts are told apart by weight
 * addresses, as `tokprof moe`), its steps in the step model. */
static int moe_table(struct actx *a, const struct tkp_model *m, struct tkp_atab *t)
{
    struct tkp_reader *r;
    struct tkp_libmodel lm = {0};
    const char *path = a->ctx.inputs[0];
    int err = tkp_cmd_open(&a->ctx, path, &r);
    if (err) return err;
    if (tkp_reader_is_merged(r))
        err = tkp_cmd_fail(&a->ctx, TKP_ERR_USAGE,
                           "%s: one process at a time (these captures are of several)", path);
    else if ((err = tkp_libmodel_load(r, &lm)))
        err = tkp_cmd_fail(&a->ctx, err, "%s: out of memory", path);
    else if ((err = tkp_table_moe(&lm, m, t)))
        err = tkp_cmd_fail(&a->ctx, err, "out of memory");
    else
        tkp_cmd_warn_reader(&a->ctx, path, r);
    tkp_libmodel_free(&lm);
    tkp_reader_close(r);
    return err;
}

static int model_table(const char *const *paths, size_t n, const char *classes, int which,
                       struct ArrowArray *out, struct ArrowSchema *schema, char **warn,
                       char *why, size_t whylen)
{
    struct actx a;
    struct tkp_classes *cl;
    struct tkp_model m;
    struct tkp_acc *acc;
    struct tkp_atab t = {0};
    if (warn) *warn = NULL;
    int err = actx_init(&a, paths, n, why, whylen);
    if (err) return err;
    if (!(err = load(&a, classes, which == 1, &cl, &m, &acc))) {
        if (which == 2) err = moe_table(&a, &m, &t); /* its reason given */
        else if ((err = which ? tkp_table_step_classes(&m, acc, &t) : tkp_table_steps(&m, acc, &t)))
            tkp_cmd_fail(&a.ctx, err, "out of memory");
        if (!err && (err = tkp_atab_export(&t, out, schema)))
            tkp_cmd_fail(&a.ctx, err, "out of memory");
        if (err) tkp_atab_free(&t);
        tkp_acc_free(acc);
        tkp_model_free(&m);
        tkp_classes_free(cl);
    }
    return actx_done(&a, err, warn, why, whylen);
}

TKP_API int tkp_dec_steps(const char *const *paths, size_t n, const char *classes,
                          struct ArrowArray *out, struct ArrowSchema *schema, char **warn,
                          char *why, size_t whylen)
{
    return model_table(paths, n, classes, 0, out, schema, warn, why, whylen);
}

TKP_API int tkp_dec_step_classes(const char *const *paths, size_t n, const char *classes,
                                 struct ArrowArray *out, struct ArrowSchema *schema, char **warn,
                                 char *why, size_t whylen)
{
    return model_table(paths, n, classes, 1, out, schema, warn, why, whylen);
}

TKP_API int tkp_dec_moe(const char *const *paths, size_t n, struct ArrowArray *out,
                        struct ArrowSchema *schema, char **warn, char *why, size_t whylen)
{
    return model_table(paths, n, NULL, 2, out, schema, warn, why, whylen);
}

TKP_API const char *tkp_dec_col_name(int col)
{
    return tkp_table_col_name(col);
}

TKP_API const char *tkp_dec_type_name(int type)
{
    return type >= 0 ? tkp_rec_str((uint32_t)type) : NULL;
}

TKP_API int tkp_dec_records(const char *const *paths, size_t n, uint64_t types, uint64_t columns,
                            struct ArrowArray *out, struct ArrowSchema *schema, char **warn,
                            char *why, size_t whylen)
{
    struct actx a;
    struct tkp_reader *r;
    struct tkp_atab t;
    if (warn) *warn = NULL;
    int err = actx_init(&a, paths, n, why, whylen);
    if (err) return err;
    if (!(err = tkp_cmd_open(&a.ctx, paths[0], &r))) {
        err = tkp_table_records(r, types, columns, &t);
        if (!err) err = tkp_atab_export(&t, out, schema);
        else tkp_atab_free(&t);
        if (err) tkp_cmd_fail(&a.ctx, err, "out of memory");
        else tkp_cmd_warn_reader(&a.ctx, paths[0], r);
        tkp_reader_close(r);
    }
    return actx_done(&a, err, warn, why, whylen);
}

/* The commands that only read captures and write their answer (not run, which execs). */
static const struct tkp_cmd *const cmds[] = {
    &tkp_cmd_summary, &tkp_cmd_dump,    &tkp_cmd_gemm,    &tkp_cmd_moe,     &tkp_cmd_check,
    &tkp_cmd_steps,   &tkp_cmd_kernels, &tkp_cmd_analyze, &tkp_cmd_diff,    &tkp_cmd_export,
    &tkp_cmd_heatmap, &tkp_cmd_report,  &tkp_cmd_stacks,  &tkp_cmd_whatif,
};

TKP_API int tkp_dec_command(int argc, const char *const *argv, char **out, char **warn, char *why,
                            size_t whylen)
{
    struct actx a;
    const struct tkp_cmd *c = NULL;
    size_t out_len = 0;
    char **args;
    *out = NULL;
    if (warn) *warn = NULL;
    memset(&a, 0, sizeof(a));
    a.ctx.warn = warn_collect;
    a.ctx.argv0 = "tokprof";
    for (size_t i = 0; argc > 0 && i < sizeof(cmds) / sizeof(*cmds); i++)
        if (!strcmp(cmds[i]->name, argv[0])) c = cmds[i];
    if (!c) return tkp_why(why, whylen, TKP_ERR_USAGE, "unknown command '%s'", argc ? argv[0] : "");
    /* commands take char ** (parsers never write to it), NULL-terminated */
    if (!(args = calloc((size_t)argc + 1, sizeof(*args))))
        return tkp_why(why, whylen, TKP_ERR_NOMEM, "out of memory");
    memcpy(args, argv, (size_t)argc * sizeof(*args));
    if (!(a.ctx.out = open_memstream(out, &out_len))) {
        free(args);
        return tkp_why(why, whylen, TKP_ERR_NOMEM, "out of memory");
    }
    int err = c->run(argc, args, &a.ctx);
    if (a.ctx.help) /* --help among the options: the answer is the usage, as main.c prints it */
        fputs(c->usage, a.ctx.out), err = 0;
    if (fclose(a.ctx.out) && !err) err = tkp_cmd_fail(&a.ctx, TKP_ERR_NOMEM, "out of memory");
    free(args);
    return actx_done(&a, err, warn, why, whylen);
}

TKP_API void tkp_dec_free(void *p)
{
    free(p);
}
