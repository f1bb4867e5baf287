/* tokprof decoder: the tables' columns, labels, the ClickHouse schema and the grouping of inputs
 * into captures (see table.h). The rows themselves: table_rows.c. */
#include "fleet/table.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/err.h"
#include "base/grow.h"
#include "capture/multireader.h"
#include "capture/reader.h"
#include "model/columns.def"

/* clang-format off */
#define IDENT                                                                                     \
    {"host", TKP_COL_STR}, {"model", TKP_COL_STR}, {"label_keys", TKP_COL_STRS},                  \
    {"label_values", TKP_COL_STRS}, {"capture_id", TKP_COL_U64}, {"pid", TKP_COL_U64},            \
    {"tid", TKP_COL_U64}, {"version", TKP_COL_STR}, {"ingest_batch", TKP_COL_U64}
/* clang-format on */

/* each table: the identity, then the columns of model/columns.def the fleet tables have (not
 * LOCAL, LOCAL_GPU); nullable GPU numbers are Nullable (NULL for a step that was not timed:
 * model.h, tkp_mstep_timed). An F64 column here does not compile (no TKP_COL_F64). */
#define FLEET_ALL(name, t, nul) {#name, t},
#define FLEET_FLEET(name, t, nul) {#name, t},
#define FLEET_GPU(name, t, nul) {#name, (nul) && (t) == TKP_COL_U64 ? TKP_COL_NU64 : (t)},
#define FLEET_TIME(name, t, nul) {#name, t},
#define FLEET_LOCAL(name, t, nul)
#define FLEET_LOCAL_GPU(name, t, nul)
#define COL_NUM(name, type, where, nul, ...) FLEET_##where(name, TKP_COL_##type, nul)
#define COL_STR(name, where, nul, ...) FLEET_##where(name, TKP_COL_STR, nul)
static const struct tkp_tab_col steps[] = {IDENT, TKP_COLS_STEPS(COL_NUM, COL_STR)};
static const struct tkp_tab_col step_classes[] = {IDENT, TKP_COLS_STEP_CLASSES(COL_NUM, COL_STR)};
static const struct tkp_tab_col kernels[] = {IDENT, TKP_COLS_KERNELS(COL_NUM, COL_STR)};
static const struct tkp_tab_col calls[] = {IDENT, TKP_COLS_CALLS(COL_NUM, COL_STR)};
static const struct tkp_tab_col moe[] = {IDENT, TKP_COLS_MOE(COL_NUM, COL_STR)};
#undef COL_NUM
#undef COL_STR
static const struct {
    const char *name;
    const struct tkp_tab_col *cols;
    int ncols;
    const char *time_col; /* epoch ns the day partition is taken from */
    const char *order;    /* the MergeTree sorting key: for the queries of docs/FLEET.md */
} tabs[TKP_TAB_COUNT] = {
#define TAB(n, t, o)                                                                               \
    {                                                                                              \
#n, n, (int)(sizeof(n) / sizeof(*n)), t, o                                                 \
    }
    TAB(steps, "begin_ns", "host, model, capture_id, thread, seg"),
    TAB(step_classes, "begin_ns", "host, class, capture_id, thread, seg"),
    TAB(kernels, "hour_ns", "host, class, name, capture_id, hour_ns"),
    TAB(calls, "hour_ns", "host, lib, op, capture_id, hour_ns"),
    TAB(moe, "begin_ns", "host, capture_id, thread, seg, layer, expert"),
#undef TAB
};

const char *tkp_tab_name(int table)
{
    return table >= 0 && table < TKP_TAB_COUNT ? tabs[table].name : "?";
}

int tkp_tab_find(const char *name)
{
    for (int t = 0; t < TKP_TAB_COUNT; t++)
        if (!strcmp(tabs[t].name, name)) return t;
    return -1;
}

const struct tkp_tab_col *tkp_tab_cols(int table, int *n)
{
    *n = tabs[table].ncols;
    return tabs[table].cols;
}

void tkp_tab_print_columns(FILE *f, int table)
{
    for (int c = 0; c < tabs[table].ncols; c++)
        fprintf(f, "%s%s", c ? ", " : "", tabs[table].cols[c].name);
}

int tkp_tab_label(struct tkp_tab_ident *id, char *kv, char *why, size_t whylen)
{
    char *eq = strchr(kv, '=');
    size_t klen = eq ? (size_t)(eq - kv) : 0;
    int ok = eq && klen && klen <= 64 && !(kv[0] >= '0' && kv[0] <= '9');
    for (size_t i = 0; ok && i < klen; i++)
        ok = kv[i] == '_' || (kv[i] >= 'a' && kv[i] <= 'z') || (kv[i] >= 'A' && kv[i] <= 'Z') ||
             (kv[i] >= '0' && kv[i] <= '9');
    if (!ok)
        return tkp_why(why, whylen, TKP_ERR_USAGE,
                       "--label '%.64s': want KEY=VALUE, KEY a name of letters, digits and _", kv);
    *eq = '\0';
    const char *v = eq + 1;
    int dup = (!strcmp(kv, "host") && id->host) || (!strcmp(kv, "model") && id->model);
    for (size_t i = 0; i < id->nlabels; i++)
        dup |= !strcmp(id->keys[i], kv);
    if (!dup && (!strcmp(kv, "host") || !strcmp(kv, "model"))) {
        *(kv[0] == 'h' ? &id->host : &id->model) = v;
        return 0;
    }
    if (dup) {
        *eq = '=';
        return tkp_why(why, whylen, TKP_ERR_USAGE, "--label '%.64s': key given twice", kv);
    }
    if (id->nlabels == TKP_TAB_LABELS_MAX)
        return tkp_why(why, whylen, TKP_ERR_USAGE, "more than %d labels", TKP_TAB_LABELS_MAX);
    id->keys[id->nlabels] = kv;
    id->values[id->nlabels++] = v;
    return 0;
}

/* The schema. Rules that keep it readable by 18.16 (Debian 12's) and current ClickHouse: no
 * Map, DateTime64 or per-column codecs; `day` is a DEFAULT column (a Distributed insert refuses
 * MATERIALIZED ones), computed from the row's epoch ns, so inserts send an explicit column list
 * without it. */
void tkp_tab_ddl_clickhouse(FILE *f, const char *db, const char *cluster)
{
    fprintf(f, "CREATE DATABASE IF NOT EXISTS %s;\n", db);
    for (int t = 0; t < TKP_TAB_COUNT; t++) {
        fprintf(f, "CREATE TABLE IF NOT EXISTS %s.%s_local (", db, tabs[t].name);
        for (int c = 0; c < tabs[t].ncols; c++)
            fprintf(f, "%s %s", tabs[t].cols[c].name, tkp_tab_type_name(tabs[t].cols[c].type)),
                fputs(", ", f);
        fprintf(f,
                "day Date DEFAULT toDate(toDateTime(intDiv(%s, 1000000000)))) "
                "ENGINE = MergeTree PARTITION BY day ORDER BY (%s);\n",
                tabs[t].time_col, tabs[t].order);
        fprintf(f,
                "CREATE TABLE IF NOT EXISTS %s.%s AS %s.%s_local "
                "ENGINE = Distributed(%s, %s, %s_local, cityHash64(host));\n",
                db, tabs[t].name, db, tabs[t].name, cluster, db, tabs[t].name);
    }
}

/* ---- inputs into captures ---- */

static int add_file(struct tkp_tab_groups *g, size_t *cap, const char *path)
{
    struct tkp_reader *r;
    char w[256];
    int err = tkp_reader_open(path, &r, w, sizeof(w));
    tkp_reader_close(r);
    if (err) { /* not fatal: named in g->bad */
        size_t old = g->bad ? strlen(g->bad) : 0, n = strlen(path) + strlen(w) + 4;
        if (TKP_GROW_FROM(g->bad, g->badcap, old + n, 256)) return TKP_ERR_NOMEM;
        snprintf(g->bad + old, n, "%s: %s\n", path, w);
        return 0;
    }
    if (g->nfiles == TKP_INPUTS_MAX) return TKP_ERR_USAGE;
    if (TKP_GROW(g->files, *cap, g->nfiles + 1)) return TKP_ERR_NOMEM;
    if (!(g->files[g->nfiles] = strdup(path))) return TKP_ERR_NOMEM;
    g->nfiles++;
    return 0;
}

/* A directory's *.tokprof files (the multireader's rule), each checked on its own so that one
 * bad file does not hide the others. */
static int add_dir(struct tkp_tab_groups *g, size_t *cap, const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return add_file(g, cap, dir);
    int err = 0;
    char path[4096];
    for (struct dirent *de; !err && (de = readdir(d));) {
        size_t n = strlen(de->d_name);
        struct stat st;
        if (de->d_name[0] == '.' || n <= 8 || strcmp(de->d_name + n - 8, ".tokprof")) continue;
        snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
        if (!stat(path, &st) && S_ISREG(st.st_mode)) err = add_file(g, cap, path);
    }
    closedir(d);
    return err;
}

int tkp_tab_groups(const char *const *inputs, size_t n, struct tkp_tab_groups *g, char *why,
                   size_t whylen)
{
    size_t cap = 0;
    int err = 0;
    struct stat st;
    memset(g, 0, sizeof(*g));
    for (size_t i = 0; !err && i < n; i++)
        err = !stat(inputs[i], &st) && S_ISDIR(st.st_mode) ? add_dir(g, &cap, inputs[i])
                                                           : add_file(g, &cap, inputs[i]);
    if (err == TKP_ERR_USAGE)
        return tkp_why(why, whylen, err, "more than %d capture files", TKP_INPUTS_MAX);
    if (err) return tkp_why(why, whylen, err, "out of memory");
    if (!(g->first = calloc(g->nfiles + 1, sizeof(*g->first))))
        return tkp_why(why, whylen, TKP_ERR_NOMEM, "out of memory");
    if (!g->nfiles) return 0;
    /* the multireader groups them (rotated files of one process, in order) */
    struct tkp_reader *r;
    if ((err = tkp_reader_open_many((const char *const *)g->files, g->nfiles, &r, why, whylen)))
        return err;
    char **sorted = malloc(g->nfiles * sizeof(*sorted));
    if (!sorted) {
        tkp_reader_close(r);
        return tkp_why(why, whylen, TKP_ERR_NOMEM, "out of memory");
    }
    size_t k = 0;
    g->ngroups = tkp_reader_ngroups(r);
    for (size_t gi = 0; gi < g->ngroups; gi++) {
        size_t f0, nf;
        tkp_reader_group(r, gi, &f0, &nf);
        g->first[gi] = k;
        for (size_t j = f0; j < f0 + nf; j++) {
            const char *p;
            tkp_reader_file(r, j, &p, NULL);
            sorted[k++] = strdup(p ? p : g->files[0]);
        }
    }
    g->first[g->ngroups] = k;
    tkp_reader_close(r);
    for (size_t j = 0; j < g->nfiles; j++)
        free(g->files[j]);
    free(g->files);
    g->files = sorted;
    for (size_t j = 0; j < k; j++)
        if (!sorted[j]) return tkp_why(why, whylen, TKP_ERR_NOMEM, "out of memory");
    return 0;
}

void tkp_tab_groups_free(struct tkp_tab_groups *g)
{
    for (size_t j = 0; j < g->nfiles; j++)
        free(g->files[j]);
    free(g->files);
    free(g->first);
    free(g->bad);
    memset(g, 0, sizeof(*g));
}
