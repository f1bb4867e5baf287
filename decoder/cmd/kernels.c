/* tokprof kernels: GPU time by kernel name or class — count, total, mean, p50, p99, share.
 *
 * Percentiles come from the model's per-name histograms (<= 1% relative error, model.h); class
 * rows merge the histograms of their names, so `--name` filters class rows too. Without GPU
 * records the rows are host launch counts (eager launches plus the kernel nodes of each graph
 * replay) and the reason is said.
 *
 * JSON (`--json`): {"gpu": {"available", "reason"}, "by": "name"|"class", "kernels": N,
 *   "total_ns": T, "rows": [...]}; a row has the columns of model/columns.def (TKP_COLS_KERNELS,
 *   in its order, each with its docs line; the fleet table's hour_ns left out): name, base and
 *   class (by class: class), count, and with GPU records total_ns, mean_ns, p50_ns, p99_ns,
 *   share (of the GPU kernel time of the selected steps, 0..1), max_ns.
 * CSV (`--csv`): the row keys as columns (cmd.h, tkp_cmd_cell). */
#include <inttypes.h>
#include <regex.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/cmd.h"
#include "base/err.h"
#include "base/json.h"
#include "model/columns.h"
#include "model/model.h"
#include "capture/reader.h"
#include "base/sort.h"

struct opts {
    const char *path, *classes, *cls, *name_re;
    int json, csv, by_class;
    int64_t from, to;
    uint64_t top;
    uint32_t tid;
};

struct row {
    const char *name; /* raw name, or the class name */
    int cls;
    uint64_t launches;
    struct tkp_dist d; /* by class: a merged copy that owns its hist */
};

static int parse(int argc, char **argv, struct tkp_ctx *ctx, struct opts *o)
{
    uint64_t tid = o->tid;
    const char *by = NULL;
    const struct tkp_opt opts[] = {
        {"--json", 'f', &o->json, 0, NULL, NULL},
        {"--csv", 'f', &o->csv, 0, NULL, NULL},
        {"--by", 's', &by, 0, "--by name or --by class", NULL},
        {"--classes", 's', &o->classes, 0, NULL, NULL},
        {"--class", 's', &o->cls, 0, NULL, NULL},
        {"--name", 's', &o->name_re, 0, NULL, NULL},
        {"--from", 'u', &o->from, INT64_MAX, NULL, NULL},
        {"--to", 'u', &o->to, INT64_MAX, NULL, NULL},
        {"--thread", 'u', &tid, INT64_MAX, NULL, NULL},
        {"--top", 'u', &o->top, INT64_MAX, NULL, NULL},
    };
    int err = tkp_cmd_parse(ctx, argc, argv, opts, sizeof(opts) / sizeof(*opts), &o->path);
    if (err) return err;
    if (tid > UINT32_MAX) return tkp_cmd_fail(ctx, TKP_ERR_USAGE, "--thread: bad tid");
    o->tid = (uint32_t)tid;
    if (by && strcmp(by, "name") && strcmp(by, "class"))
        return tkp_cmd_fail(ctx, TKP_ERR_USAGE, "--by name or --by class");
    o->by_class = by && !strcmp(by, "class");
    if (o->json && o->csv) return tkp_cmd_fail(ctx, TKP_ERR_USAGE, "--json or --csv, not both");
    return 0;
}

static int gpu_sort; /* qsort has no context argument: set before sorting */

static int cmp_row(const void *a, const void *b)
{
    const struct row *x = a, *y = b;
    uint64_t vx = gpu_sort ? x->d.total_ns : x->launches, vy = gpu_sort ? y->d.total_ns : y->launches;
    if (vx != vy) return vx > vy ? -1 : 1;
    return strcmp(x->name, y->name);
}

/* The rows to show, sorted; by class they own merged histograms. */
static int build_rows(const struct opts *o, const struct tkp_model *m, int cls_filter,
                      const regex_t *re, int gpu, struct row **out, size_t *nout)
{
    int nc = tkp_classes_count(m->opts.classes);
    size_t cap = o->by_class ? (size_t)nc : m->nnames, n = 0;
    struct row *rows = calloc(cap ? cap : 1, sizeof(*rows));
    if (!rows) return TKP_ERR_NOMEM;
    if (o->by_class)
        for (int c = 0; c < nc; c++)
            rows[c].name = tkp_classes_name(m->opts.classes, c), rows[c].cls = c;
    for (size_t i = 0; i < m->nnames; i++) {
        const struct tkp_mname *nm = &m->names[i];
        if (cls_filter >= 0 && nm->cls != cls_filter) continue;
        if (re && regexec(re, nm->name, 0, NULL, 0)) continue;
        if (gpu ? !nm->d.count : !nm->launches) continue;
        if (o->by_class) {
            rows[nm->cls].launches += nm->launches;
            if (tkp_dist_merge(&rows[nm->cls].d, &nm->d)) {
                for (int c = 0; c < nc; c++)
                    free(rows[c].d.hist);
                free(rows);
                return TKP_ERR_NOMEM;
            }
        } else {
            rows[n++] = (struct row){nm->name, nm->cls, nm->launches, nm->d};
        }
    }
    if (o->by_class) { /* drop empty classes, keeping the owned hists of the rest */
        for (int c = 0; c < nc; c++) {
            if (gpu ? rows[c].d.count : rows[c].launches) rows[n++] = rows[c];
            else free(rows[c].d.hist);
        }
    }
    gpu_sort = gpu;
    tkp_sort(rows, n, sizeof(*rows), cmp_row);
    *out = rows;
    *nout = n;
    return 0;
}

/* Whether column k is shown in --json and --csv: the local views' ones, the GPU ones only with
 * GPU records, by class from `class` on. */
static int col_shown(int k, int by_class, int gpu)
{
    const struct tkp_colspec *c = &tkp_kern_cols[k];
    return tkp_col_local(c) && (gpu || !tkp_col_gpu(c)) && (!by_class || k >= TKP_KC_class);
}

static void print(FILE *f, const struct opts *o, const struct tkp_model *m, const struct row *rows,
                  size_t n, int gpu, const char *why)
{
    uint64_t count = 0, total = m->kernel_ns_total;
    char base[256];
    for (size_t i = 0; i < n; i++)
        count += gpu ? rows[i].d.count : rows[i].launches;
    if (o->top && n > o->top) n = (size_t)o->top;
    const char *what = o->by_class ? "class" : "name";
    if (o->json) {
        fprintf(f, "{\"gpu\":{\"available\":%s,\"reason\":", gpu ? "true" : "false");
        tkp_json_str(f, gpu ? NULL : why);
        fprintf(f, "},\"by\":\"%s\",\"kernels\":%" PRIu64 ",\"total_ns\":", what, count);
        if (gpu) fprintf(f, "%" PRIu64, total);
        else fputs("null", f);
        fputs(",\"rows\":[", f);
    } else if (o->csv) {
        for (int k = 0, first = 1; k < TKP_KC_COUNT; k++)
            if (col_shown(k, o->by_class, gpu))
                fprintf(f, "%s%s", first ? "" : ",", tkp_kern_cols[k].name), first = 0;
        putc('\n', f);
    } else {
        if (gpu)
            fprintf(f, "GPU time by kernel %s: %" PRIu64 " kernels, %.3f ms\n", what, count,
                    (double)total / 1e6);
        else
            fprintf(f, "GPU: not recorded (%s): host launch counts only\n", why);
        fprintf(f, "%8s", "count");
        if (gpu) fprintf(f, " %11s %9s %9s %9s %6s", "total_us", "mean_us", "p50_us", "p99_us",
                         "share");
        fputs(o->by_class ? "  class\n" : "  class          name\n", f);
    }
    for (size_t i = 0; i < n; i++) {
        const struct row *r = &rows[i];
        struct tkp_kernrow kr = {.name = r->name, .base = base,
                                 .cls = tkp_classes_name(m->opts.classes, r->cls), .d = &r->d,
                                 .count = gpu ? r->d.count : r->launches, .all_ns = total};
        int64_t v[TKP_KC_COUNT];
        const char *str[TKP_KC_COUNT];
        int has[TKP_KC_COUNT];
        tkp_kernel_base_name(r->name, base, sizeof(base));
        for (int k = 0; k < TKP_KC_COUNT; k++)
            str[k] = NULL, v[k] = 0, has[k] = tkp_kernrow_cell(&kr, k, &v[k], &str[k]);
        if (o->json || o->csv) {
            if (o->json) fputs(i ? ",{" : "{", f);
            for (int k = 0, first = 1; k < TKP_KC_COUNT; k++)
                if (col_shown(k, o->by_class, gpu))
                    tkp_cmd_cell(f, o->json, first, &tkp_kern_cols[k], has[k], v[k], str[k]),
                        first = 0;
            putc(o->json ? '}' : '\n', f);
            continue;
        }
        fprintf(f, "%8" PRId64, v[TKP_KC_count]);
        if (gpu)
            fprintf(f, " %11.1f %9.2f %9.2f %9.2f %5.1f%%", (double)v[TKP_KC_total_ns] / 1e3,
                    (double)v[TKP_KC_mean_ns] / 1e3, (double)v[TKP_KC_p50_ns] / 1e3,
                    (double)v[TKP_KC_p99_ns] / 1e3, 100 * tkp_cell_f64(v[TKP_KC_share]));
        fprintf(f, "  %-13s", kr.cls);
        if (!o->by_class) fprintf(f, "  %s", base);
        putc('\n', f);
    }
    if (o->json) fputs("]}\n", f);
}

static int run(int argc, char **argv, struct tkp_ctx *ctx)
{
    struct opts o = {.from = -1, .to = -1};
    struct tkp_classes *cl;
    struct tkp_model m;
    regex_t re;
    char why[256];
    int err = parse(argc, argv, ctx, &o), cls_filter = -1;
    if (err) return err;
    if (o.name_re && regcomp(&re, o.name_re, REG_EXTENDED | REG_NOSUB))
        return tkp_cmd_fail(ctx, TKP_ERR_USAGE, "--name: bad regular expression '%s'", o.name_re);
    if ((err = tkp_cmd_classes(ctx, o.classes, &cl))) {
        if (o.name_re) regfree(&re);
        return err;
    }
    if (o.cls && (cls_filter = tkp_classes_find(cl, o.cls)) < 0) {
        err = tkp_cmd_fail(ctx, TKP_ERR_USAGE, "--class: no class '%s'", o.cls);
        goto out;
    }
    struct tkp_model_opts mo = {.classes = cl, .from = o.from, .to = o.to, .tid = o.tid};
    tkp_model_init(&m, &mo);
    if (!(err = tkp_cmd_load_model(ctx, o.path, &m))) {
        struct row *rows;
        size_t n;
        int gpu = tkp_model_gpu(&m, why, sizeof(why));
        if ((err = build_rows(&o, &m, cls_filter, o.name_re ? &re : NULL, gpu, &rows, &n))) {
            tkp_cmd_fail(ctx, err, "out of memory");
        } else {
            print(ctx->out, &o, &m, rows, n, gpu, why);
            for (size_t i = 0; o.by_class && i < n; i++)
                free(rows[i].d.hist);
            free(rows);
        }
    }
    tkp_model_free(&m);
out:
    if (o.name_re) regfree(&re);
    tkp_classes_free(cl);
    return err;
}

const struct tkp_cmd tkp_cmd_kernels = {
    .name = "kernels",
    .brief = "GPU time by kernel name or class: count, total, mean, p50, p99, share",
    .usage =
        "usage: tokprof kernels [--by name|class] [--json|--csv] [--from N] [--to N]\n"
        "                       [--thread TID] [--class C] [--name REGEX] [--top N]\n"
        "                       [--classes FILE] CAPTURE...\n"
        "\n"
        "GPU time of the kernels in the capture FILE, by kernel name (default) or by class\n"
        "(attention, gemm, moe, norm, activation, rope, kv-cache, sampling, communication,\n"
        "copy, embedding, elementwise, other): count, total, mean, p50 and p99 duration\n"
        "(percentiles within 1%), and share of all kernel time. Without GPU records, host\n"
        "launch counts only, and why.\n"
        "CAPTURE... is one or more captures or directories (their *.tokprof files), merged on\n"
        "one timeline by host time; a process's rotated files read as one (docs/OPERATIONS.md).\n"
        "\n"
        "  --from N, --to N  token steps N.. / ..N of each thread (set-up work excluded)\n"
        "  --thread TID      kernels launched by one OS thread\n"
        "  --class C         one class;  --name REGEX  names matching REGEX (POSIX ERE)\n"
        "  --top N           the first N rows\n"
        "  --classes FILE    extra 'CLASS REGEX' lines, tried before the built-in classes\n"
        "  --json, --csv     for scripts (keys: decoder/model/columns.def)\n"
        "\n"
        "example: where attention time goes after the first 10 tokens\n"
        "  tokprof kernels --from 10 --class attention server.1234.tokprof\n",
    .run = run,
};
