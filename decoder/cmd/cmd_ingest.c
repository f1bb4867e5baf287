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

static int seconds(struct tkp_ctx *ctx, const char *opt, const char *v, double *out)
{
    char *end;
    if (!v) return tkp_cmd_fail(ctx, TKP_ERR_USAGE, "%s needs a value", opt);
    double x = strtod(v, &end);
    if (end == v || *end || x < 0 || x > 86400)
        return tkp_cmd_fail(ctx, TKP_ERR_USAGE, "%s: '%s' is not a number of seconds", opt, v);
    *out = x;
    return 0;
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
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int takes = !strcmp(a, "--url") || !strcmp(a, "--watch") || !strcmp(a, "--state") ||
                    !strcmp(a, "--database") || !strcmp(a, "--label") || !strcmp(a, "--classes") ||
                    !strcmp(a, "--settle") || !strcmp(a, "--poll") ||
                    !strcmp(a, "--batch");
        if (takes && !argv[i + 1]) return tkp_cmd_fail(ctx, TKP_ERR_USAGE, "%s needs a value", a);
        const char *v = takes ? argv[++i] : NULL;
        if (!strcmp(a, "--url"))
            url = v;
        else if (!strcmp(a, "--watch"))
            in.watch = v;
        else if (!strcmp(a, "--state"))
            in.state = v;
        else if (!strcmp(a, "--database"))
            in.db = v;
        else if (!strcmp(a, "--classes"))
            classes = v;
        else if (!strcmp(a, "--label")) {
            if ((err = tkp_tab_label(&id, argv[i], ctx->why, sizeof(ctx->why)))) return err;
        } else if (!strcmp(a, "--settle")) {
            if ((err = seconds(ctx, a, v, &in.settle_s))) return err;
        } else if (!strcmp(a, "--batch")) {
            if ((err = seconds(ctx, a, v, &in.batch_s))) return err;
        } else if (!strcmp(a, "--poll")) {
            if ((err = seconds(ctx, a, v, &in.poll_s))) return err;
        } else if (!strcmp(a, "--exit-when-idle"))
            in.exit_when_idle = 1;
        else if (a[0] == '-' && a[1])
            return tkp_cmd_fail(ctx, TKP_ERR_USAGE, "unknown option '%s'", a);
        else if ((err = tkp_cmd_input(ctx, &first, a)))
            return err;
    }
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
        fprintf(ctx->out, "ingested %llu captures, %llu rows\n", (unsigned long long)in.captures,
                (unsigned long long)in.rows);
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
        "                    are read whole once their files have not changed for S seconds\n"
        "                    (default 5)\n"
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
