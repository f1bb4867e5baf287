/* tokprof ingest: captures into ClickHouse over HTTP, each once, across restarts (ingest.h). Only
 * options and messages here. */
#include <stdlib.h>
#include <string.h>

#include "model/classes.h"
#include "cmd/cmd.h"
#include "base/err.h"
#include "fleet/ingest.h"

static void say(void *arg, int warn, const char *line)
{
    struct tkp_ctx *ctx = arg;
    (void)warn; /* waits and problems both go to stderr, through main.c */
    ctx->warn(ctx, "%s", line);
}

/* --settle S, --poll S: seconds, 0 to a day, into a double */
static int seconds(struct tkp_ctx *ctx, const char *opt, const char *v, void *dst)
{
    char *end;
    double x = strtod(v, &end);
    if (end == v || *end || x < 0 || x > 86400)
        return tkp_cmd_fail(ctx, TKP_ERR_USAGE, "%s: '%s' is not a number of seconds", opt, v);
    *(double *)dst = x;
    return 0;
}

/* --label KEY=VALUE, repeatable: v is an argv string, writable, alive as long as id */
static int label(struct tkp_ctx *ctx, const char *name, const char *v, void *dst)
{
    (void)name;
    return tkp_tab_label(dst, (char *)v, ctx->why, sizeof(ctx->why));
}

static int run(int argc, char **argv, struct tkp_ctx *ctx)
{
    struct tkp_tab_ident id = {0};
    struct tkp_ingest in = {.db = "tokprof",
                            .state = "tokprof-ingest.state",
                            .settle_s = 5,
                            .batch_s = 5,
                            .poll_s = 1,
                            .id = &id,
                            .say = say,
                            .arg = ctx};
    const char *url = NULL, *classes = NULL, *first = NULL;
    struct tkp_classes *cl;
    int err;
    const char *args[TKP_CMD_INPUTS_MAX + 1];
    size_t n;
    const struct tkp_opt opts[] = {
        {"--url", 's', &url, 0, NULL, NULL},
        {"--watch", 's', &in.watch, 0, NULL, NULL},
        {"--state", 's', &in.state, 0, NULL, NULL},
        {"--database", 's', &in.db, 0, NULL, NULL},
        {"--label", 'c', &id, 0, NULL, label},
        {"--classes", 's', &classes, 0, NULL, NULL},
        {"--settle", 'c', &in.settle_s, 0, NULL, seconds},
        {"--poll", 'c', &in.poll_s, 0, NULL, seconds},
        {"--batch", 'c', &in.batch_s, 0, NULL, seconds},
        {"--exit-when-idle", 'f', &in.exit_when_idle, 0, NULL, NULL},
    };
    if ((err = tkp_cmd_parse_args(ctx, argc, argv, opts, sizeof(opts) / sizeof(*opts), args,
                                  TKP_CMD_INPUTS_MAX + 1, &n)))
        return err;
    for (size_t i = 0; i < n; i++)
        if ((err = tkp_cmd_input(ctx, &first, args[i]))) return err;
    if (!url) return tkp_cmd_fail(ctx, TKP_ERR_USAGE, "--url http://HOST:PORT is required");
    if (!first && !in.watch)
        return tkp_cmd_fail(ctx, TKP_ERR_USAGE, "no capture given (or --watch DIR)");
    for (const char *p = in.db; *p; p++)
        if (!(*p == '_' || (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
              (*p >= '0' && *p <= '9')))
            return tkp_cmd_fail(ctx, TKP_ERR_USAGE, "--database '%s': letters, digits and _ only",
                                in.db);
    if ((err = tkp_url_parse(url, &in.url, ctx->why, sizeof(ctx->why)))) return err;
    if ((err = tkp_cmd_classes(ctx, classes, &cl))) return err;
    in.cl = cl;
    in.inputs = ctx->inputs;
    in.ninputs = ctx->ninputs;
    err = tkp_ingest_run(&in, ctx->why, sizeof(ctx->why));
    tkp_classes_free(cl);
    if (!err)
        fprintf(ctx->out, "ingested %llu captures, %llu rows (%llu stored before)\n",
                (unsigned long long)in.captures, (unsigned long long)in.rows,
                (unsigned long long)in.stored);
    if (!err && in.skipped)
        err = tkp_cmd_fail(ctx, TKP_ERR_VIOLATION, "%llu input%s could not be read",
                           (unsigned long long)in.skipped, in.skipped > 1 ? "s" : "");
    return err;
}

const struct tkp_cmd tkp_cmd_ingest = {
    .name = "ingest",
    .brief = "send captures' tables to ClickHouse over HTTP, each once, restart-safe (--watch)",
    .usage =
        "usage: tokprof ingest --url http://HOST[:PORT] [--watch DIR] [--state FILE]\n"
        "                      [--database DB] [--label KEY=VALUE]... [--batch S] [--settle S]\n"
        "                      [--poll S] [--exit-when-idle] [--classes FILE] [CAPTURE|DIR...]\n"
        "\n"
        "Sends the five tables of `tokprof table` (steps, step_classes, kernels, calls, moe) of\n"
        "each capture to ClickHouse's HTTP interface (default port 8123), into the Distributed\n"
        "tables of `tokprof table --ddl clickhouse` (database DB, default tokprof), gzip'd, one\n"
        "INSERT per batch and table, acknowledged once the shard stored it.\n"
        "Each row is sent once: progress is kept in the state file (default\n"
        "./tokprof-ingest.state); after a kill, a send whose outcome is unknown is settled by\n"
        "counting the batch's rows on the server, so nothing is lost or sent twice. While the\n"
        "server (or a shard) is unreachable it retries with backoff (0.5 s doubling to 30 s),\n"
        "saying on stderr what it waits for; another server error stops it with the server's\n"
        "text (exit 2).\n"
        "\n"
        "  --watch DIR       follow DIR (the shim's TOKPROF_OUT) until killed: each capture\n"
        "                    written there is read chunk by chunk as it grows (rotated files\n"
        "                    too), and a step's rows are sent once the step is over; kernels,\n"
        "                    calls and moe (per capture) once its process ended\n"
        "  --batch S         with --watch: at most one batch per capture every S seconds\n"
        "                    (default 5)\n"
        "  --settle S        captures given as arguments, and flight-recorder snapshots in DIR,\n"
        "                    are read whole once written: once the shim let go of its lock on\n"
        "                    their files (it holds one while it writes), or, for files of older\n"
        "                    shims, once they have not changed for S seconds (default 5); a\n"
        "                    capture still being written is waited for, saying so\n"
        "  --poll S          seconds between looks at DIR when nothing tells (default 1)\n"
        "  --exit-when-idle  with --watch: exit once every capture's process has ended and\n"
        "                    all of it was sent\n"
        "  --label K=V       identity columns and labels, as in tokprof table\n"
        "An unreadable capture is named and skipped (exit 1 at the end).\n"
        "\n"
        "example: follow a server's captures\n"
        "  tokprof ingest --url http://clickhouse:8123 --label model=llama3-8b \\\n"
        "      --state /var/lib/tokprof/ingest.state --watch /var/tokprof\n",
    .run = run,
};
