/* tokprof decoder: helpers shared by the subcommands (see cmd.h). */
#include "cmd.h"

#include <stdarg.h>

#include "err.h"
#include "reader.h"

int tkp_cmd_fail(struct tkp_ctx *ctx, int err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ctx->why, sizeof(ctx->why), fmt, ap);
    va_end(ap);
    return err;
}

int tkp_cmd_open(struct tkp_ctx *ctx, const char *path, struct tkp_reader **r)
{
    char why[256];
    int err = tkp_reader_open(path, r, why, sizeof(why));
    return err ? tkp_cmd_fail(ctx, err, "%s: %s", path, why) : 0;
}

void tkp_cmd_warn_reader(struct tkp_ctx *ctx, const char *path, const struct tkp_reader *r)
{
    const struct tkp_reader_err *e = tkp_reader_error(r);
    const struct tkp_reader_stats *s = tkp_reader_stats(r);
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
