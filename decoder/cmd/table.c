/* tokprof table: captures as rows for a column store (table.h), and the ClickHouse schema. Only
 * options and printing here; the rows come from table_rows.c, the formats from table_out.c. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model/classes.h"
#include "cmd/cmd.h"
#include "base/err.h"
#include "fleet/table.h"
#include "fleet/table_rows.h"

struct opts {
    int table, fmt, z, level, columns;
    const char *ddl, *db, *cluster, *classes, *out;
    struct tkp_tab_ident id;
};

static int table_format(struct tkp_ctx *ctx, const char *name, const char *v, void *dst)
{
    if ((*(int *)dst = tkp_tab_fmt_parse(v)) < 0)
        return tkp_cmd_fail(ctx, TKP_ERR_USAGE, "%s: '%s' is not tsv, json or native", name, v);
    return 0;
}

static int compress(struct tkp_ctx *ctx, const char *name, const char *v, void *dst)
{
    if ((*(int *)dst = tkp_tab_z_parse(v)) < 0)
        return tkp_cmd_fail(ctx, TKP_ERR_USAGE, "%s: '%s' is not zstd, gzip or none", name, v);
    return 0;
}

/* --label KEY=VALUE, repeatable: v is an argv string, writable, alive as long as id */
static int label(struct tkp_ctx *ctx, const char *name, const char *v, void *dst)
{
    (void)name;
    return tkp_tab_label(dst, (char *)v, ctx->why, sizeof(ctx->why));
}

static int parse(int argc, char **argv, struct tkp_ctx *ctx, struct opts *o)
{
    const char *first = NULL, *args[TKP_CMD_INPUTS_MAX + 1];
    uint64_t level = (uint64_t)o->level, window = UINT64_MAX; /* UINT64_MAX: not given */
    size_t n;
    const struct tkp_opt opts[] = {
        {"--format", 'c', &o->fmt, 0, NULL, table_format},
        {"--compress", 'c', &o->z, 0, NULL, compress},
        {"--level", 'u', &level, 19, NULL, NULL},
        {"--label", 'c', &o->id, 0, NULL, label},
        {"--ddl", 's', &o->ddl, 0, NULL, NULL},
        {"--database", 's', &o->db, 0, NULL, NULL},
        {"--cluster", 's', &o->cluster, 0, NULL, NULL},
        {"--classes", 's', &o->classes, 0, NULL, NULL},
        {"-o", 's', &o->out, 0, NULL, NULL},
        {"--columns", 'f', &o->columns, 0, NULL, NULL},
        {"--moe-window", 'u', &window, UINT32_MAX, NULL, NULL},
    };
    int err = tkp_cmd_parse_args(ctx, argc, argv, opts, sizeof(opts) / sizeof(*opts), args,
                                 TKP_CMD_INPUTS_MAX + 1, &n);
    if (err) return err;
    o->level = (int)level;
    if (window != UINT64_MAX) o->id.moe_window = window ? window : UINT64_MAX; /* 0: whole */
    if (n && (o->table = tkp_tab_find(args[0])) < 0)
        return tkp_cmd_fail(ctx, TKP_ERR_USAGE,
                            "'%s' is not a table (steps, step_classes, kernels, calls, moe)",
                            args[0]);
    for (size_t i = 1; i < n && !o->ddl; i++) /* --ddl prints the schema, reading no capture */
        if ((err = tkp_cmd_input(ctx, &first, args[i]))) return err;
    if (o->ddl) {
        if (strcmp(o->ddl, "clickhouse"))
            return tkp_cmd_fail(ctx, TKP_ERR_USAGE, "--ddl: '%s' is not a known store (clickhouse)",
                                o->ddl);
        return 0;
    }
    if (o->table < 0)
        return tkp_cmd_fail(ctx, TKP_ERR_USAGE,
                            "which table? (steps, step_classes, kernels, calls, moe)");
    if (!o->columns && !first) return tkp_cmd_fail(ctx, TKP_ERR_USAGE, "no capture given");
    return 0;
}

static int sink_file(void *arg, const void *buf, size_t n)
{
    return fwrite(buf, 1, n, arg) == n ? 0 : TKP_ERR_IO;
}

/* Every capture's rows into one stream. Returns 0, or VIOLATION (exit 1) when some input was
 * skipped, or the first fatal error. */
static int write_rows(struct tkp_ctx *ctx, const struct opts *o, const struct tkp_classes *cl,
                      FILE *f)
{
    struct tkp_tab_groups g;
    struct tkp_tab_out *outs[TKP_TAB_COUNT] = {0};
    int ncols, err = tkp_tab_groups(ctx->inputs, ctx->ninputs, &g, ctx->why, sizeof(ctx->why));
    if (err) return err;
    size_t skipped = 0;
    if (!g.ngroups) { /* nothing to write: the error is the (first) reason, on one line */
        char *nl = g.bad ? strchr(g.bad, '\n') : NULL;
        size_t more = 0;
        for (char *q = nl; q && (q = strchr(q + 1, '\n'));)
            more++;
        if (nl) *nl = '\0';
        if (more)
            err = tkp_cmd_fail(ctx, TKP_ERR_IO, "%s (and %zu more unreadable)", g.bad, more);
        else
            err =
                tkp_cmd_fail(ctx, TKP_ERR_IO, "%s", g.bad ? g.bad : "no capture among the inputs");
        tkp_tab_groups_free(&g);
        return err;
    }
    for (char *line = g.bad, *nl; line && *line; line = nl + 1, skipped++) {
        nl = strchr(line, '\n');
        *nl = '\0';
        ctx->warn(ctx, "%s: skipped", line);
    }
    const struct tkp_tab_col *cols = tkp_tab_cols(o->table, &ncols);
    if ((err =
             tkp_tab_out_new(cols, ncols, o->fmt, o->z, o->level, sink_file, f, &outs[o->table]))) {
        tkp_tab_groups_free(&g);
        return tkp_cmd_fail(ctx, err, "out of memory");
    }
    for (size_t i = 0; !err && i < g.ngroups; i++) {
        struct tkp_tab_info info;
        const char *const *files = (const char *const *)g.files + g.first[i];
        err = tkp_tab_capture(files, g.first[i + 1] - g.first[i], cl, &o->id, outs, &info, ctx->why,
                              sizeof(ctx->why));
        if (!err && info.torn) ctx->warn(ctx, "%s: decoded up to there", info.torn_why);
        if (err && err != TKP_ERR_NOMEM && err != TKP_ERR_IO) { /* it changed since it was listed */
            ctx->warn(ctx, "%s: skipped", ctx->why);
            skipped++, err = 0;
        }
    }
    int ferr = tkp_tab_out_finish(outs[o->table]);
    if (!err && ferr) err = tkp_cmd_fail(ctx, ferr, "cannot write the output");
    tkp_tab_out_free(outs[o->table]);
    tkp_tab_groups_free(&g);
    if (!err && skipped)
        err = tkp_cmd_fail(ctx, TKP_ERR_VIOLATION,
                           "%zu input%s could not be read (rows of the others written)", skipped,
                           skipped > 1 ? "s" : "");
    return err;
}

static int run(int argc, char **argv, struct tkp_ctx *ctx)
{
    struct opts o = {.table = -1, .db = "tokprof", .cluster = "tokprof"};
    struct tkp_classes *cl;
    int err = parse(argc, argv, ctx, &o);
    if (err) return err;
    if (o.ddl) {
        tkp_tab_ddl_clickhouse(ctx->out, o.db, o.cluster);
        return 0;
    }
    if (o.columns) {
        tkp_tab_print_columns(ctx->out, o.table);
        fputc('\n', ctx->out);
        return 0;
    }
    FILE *f = o.out ? tkp_cmd_output(ctx, o.out, "wb") : ctx->out;
    if (!f) return tkp_cmd_fail(ctx, TKP_ERR_IO, "%s: cannot create", o.out);
    if (f == ctx->out && o.z != TKP_Z_NONE && isatty(fileno(f))) {
        return tkp_cmd_fail(ctx, TKP_ERR_USAGE,
                            "compressed output to a terminal: redirect it, or --compress none");
    }
    if (!(err = tkp_cmd_classes(ctx, o.classes, &cl))) {
        err = write_rows(ctx, &o, cl, f);
        tkp_classes_free(cl);
    }
    if (f != ctx->out && fclose(f) && !err)
        err = tkp_cmd_fail(ctx, TKP_ERR_IO, "%s: cannot write", o.out);
    return err;
}

const struct tkp_cmd tkp_cmd_table = {
    .name = "table",
    .brief = "captures as rows for ClickHouse (steps, step_classes, kernels, calls, moe); --ddl",
    .usage =
        "usage: tokprof table TABLE [--format tsv|json|native] [--compress zstd|gzip|none]\n"
        "                     [--label KEY=VALUE]... [--classes FILE] [-o FILE] CAPTURE|DIR...\n"
        "       tokprof table TABLE --columns\n"
        "       tokprof table --ddl clickhouse [--database DB] [--cluster NAME]\n"
        "\n"
        "Rows of one table for every capture given (a directory stands for its *.tokprof files;\n"
        "a process's rotated files are one capture), for a column store. TABLE is:\n"
        "  steps         one row per step: thread, step, token index, phase, tokens, start and\n"
        "                end (epoch ns), host duration, gap before, inter-token latency, "
        "launches,\n"
        "                graph launches, copies, GPU kernels, span, busy, idle, top class, and\n"
        "                for a slow token step (over 3x the median, or at or above the capture's\n"
        "                p99 host duration) its cause\n"
        "  step_classes  one row per (step, kernel class): kernels, GPU ns, tokens\n"
        "  kernels       per capture, hour and kernel name: class, count, total, p50, p99, max\n"
        "  calls         per capture, hour and library op and shape: calls, FLOPs, host, GPU ns\n"
        "  moe           one row per (step, MoE layer, expert): routed tokens, expert GPU ns\n"
        "                (per-expert GEMMs only: tokprof moe; a second pass when the first saw\n"
        "                a hint of them, by windows of --moe-window records of a thread's\n"
        "                steps when the capture holds more: bounded memory, one more read\n"
        "                of the capture per window and phase (3); default 1048576, 0: never)\n"
        "Every row starts with the identity columns: host (META hostname, or --label host=),\n"
        "model (--label model=), label_keys/label_values (other --label pairs), capture_id\n"
        "(the same for a capture's rotated files and on every run; a snapshot has its own),\n"
        "pid, tid (0 in kernels and calls), version,\n"
        "ingest_batch. Times are epoch ns. No NULLs: unknown is 0, -1 (token index) or ''.\n"
        "docs/FLEET.md has every column, the schema and the queries.\n"
        "\n"
        "  --format F       tsv (TSVWithNames, default), json (JSONEachRow), native (Native)\n"
        "  --compress Z     zstd (default), gzip, none;  --level N  its level\n"
        "  --label K=V      an identity column (host, model) or a label; repeatable\n"
        "  -o FILE          write to FILE instead of stdout (\"-\": stdout)\n"
        "  --columns        the column list for INSERT INTO t (...) (ClickHouse 18.16 matches\n"
        "                   TSV columns by position)\n"
        "  --ddl clickhouse the CREATE statements: per table a MergeTree <table>_local\n"
        "                   partitioned by day and a Distributed <table> over --cluster\n"
        "                   (default tokprof) sharded by host, in --database (default tokprof)\n"
        "An unreadable input is named and skipped (exit 1 at the end, the other rows written);\n"
        "a torn capture is read up to its last whole chunk, with a warning.\n"
        "\n"
        "example: load the steps of a directory of captures into ClickHouse\n"
        "  tokprof table --ddl clickhouse | clickhouse-client --multiquery\n"
        "  tokprof table steps --compress none --label model=llama3-8b /var/tokprof/ |\n"
        "    clickhouse-client --insert_distributed_sync=1 --query \\\n"
        "    \"INSERT INTO tokprof.steps ($(tokprof table steps --columns)) FORMAT "
        "TSVWithNames\"\n",
    .run = run,
};
