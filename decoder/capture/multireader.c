/* tokprof decoder: several captures as one timeline (see multireader.h).
 *
 * Each group (one process's file, or its rotated files in order) has one open reader and one
 * head record taken from it; the next record of the merge is the head with the least key,
 * found by a linear scan (a handful of groups in practice; a heap pays off only past ~64).
 * The delivered head stays valid until the next call because its group's reader is advanced
 * only then. */
#include "capture/multireader.h"

#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/err.h"
#include "base/grow.h"

struct mfile {
    struct tkp_reader *done; /* its reader once read to the end, released (its names live on) */
    char *path;
    uint64_t pid; /* its META's */
    int has_err, reached;
    struct tkp_reader_err err;
    struct tkp_reader_stats st;
};

struct mgroup {
    size_t first, nfiles, cur; /* its files are files[first .. first + nfiles); cur: the open one */
    struct tkp_reader *r;      /* NULL when between files or ended */
    struct tkp_record head;
    int has_head, ended;
    uint64_t key, last; /* the head's merge key; the last timed key (untimed records take it) */
    uint64_t pid;
    uint32_t *tmap; /* capture-local thread -> merged index + 1 (0: not yet seen) */
    uint32_t tcap;
};

struct tkp_mreader {
    struct mfile *files;
    size_t nfiles;
    struct mgroup *groups;
    size_t ngroups;
    struct mgroup *pending; /* the group whose head was delivered last */
    uint32_t nthreads;      /* merged thread indices handed out */
    int state;              /* 0 reading, 1 end, <0 stopped (out of memory, too many threads) */
    struct tkp_reader_err err;
    struct tkp_reader_stats stats;
};

/* ---- inputs ---- */

/* The process key of a file whose META pid is P: for `<program>.P.tokprof` (the first file)
 * the length of `<program>.P` and rotation 0; for `<program>.P.<K>.tokprof` the same length and
 * K. -1 for any other name (a snapshot, a renamed file, or P unknown): a group of its own.
 * Matching the name against META's pid is what tells `python3.11.4567.tokprof` (pid 4567) from a
 * rotation 4567 of pid 11. */
static long rotation(const char *path, uint64_t pid, size_t *xlen)
{
    char tail[48];
    size_t n = strlen(path), e = n - strlen(".tokprof");
    if (!pid || n <= strlen(".tokprof") || strcmp(path + e, ".tokprof")) return -1;
    int t = snprintf(tail, sizeof(tail), ".%llu", (unsigned long long)pid);
    if ((size_t)t < e && !memcmp(path + e - t, tail, (size_t)t)) { /* <program>.P.tokprof */
        *xlen = e;
        return 0;
    }
    size_t b = e;
    while (b > 0 && path[b - 1] >= '0' && path[b - 1] <= '9')
        b--;
    if (b == e || e - b > 9 || b < (size_t)t + 1 || path[b - 1] != '.' ||
        memcmp(path + b - 1 - t, tail, (size_t)t))
        return -1;
    *xlen = b - 1;
    return strtol(path + b, NULL, 10);
}

/* The pid of the file's META, from its first chunk; 0 when it has none. */
static uint64_t meta_pid(struct tkp_reader *r)
{
    struct tkp_record rec;
    for (int chunks = 0; tkp_reader_next(r, &rec) == 1;) {
        if (rec.type == TKP_REC_META) return rec.meta.pid;
        if (rec.type == TKP_REC_CHUNK && ++chunks > 1) break;
    }
    return 0;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int add_path(struct tkp_mreader *m, size_t *cap, const char *path, char *why, size_t wl)
{
    if (m->nfiles == TKP_INPUTS_MAX)
        return tkp_why(why, wl, TKP_ERR_USAGE, "more than %d captures", TKP_INPUTS_MAX);
    if (TKP_GROW(m->files, *cap, m->nfiles + 1))
        return tkp_why(why, wl, TKP_ERR_NOMEM, "out of memory");
    struct mfile *f = &m->files[m->nfiles];
    memset(f, 0, sizeof(*f));
    if (!(f->path = strdup(path))) return tkp_why(why, wl, TKP_ERR_NOMEM, "out of memory");
    m->nfiles++;
    return 0;
}

/* Adds path, or the *.tokprof files of a directory in name order. */
static int add_input(struct tkp_mreader *m, size_t *cap, const char *path, char *why, size_t wl)
{
    struct stat st;
    if (stat(path, &st)) return tkp_why(why, wl, TKP_ERR_IO, "%s: %s", path, strerror(errno));
    if (!S_ISDIR(st.st_mode)) return add_path(m, cap, path, why, wl);
    DIR *d = opendir(path);
    if (!d) return tkp_why(why, wl, TKP_ERR_IO, "%s: %s", path, strerror(errno));
    size_t first = m->nfiles, plen = strlen(path);
    int err = 0;
    for (struct dirent *de; !err && (de = readdir(d));) {
        size_t n = strlen(de->d_name);
        if (de->d_name[0] == '.' || n <= 8 || strcmp(de->d_name + n - 8, ".tokprof")) continue;
        char *full = malloc(plen + n + 2);
        if (!full) {
            err = tkp_why(why, wl, TKP_ERR_NOMEM, "out of memory");
            break;
        }
        sprintf(full, "%s%s%s", path, plen && path[plen - 1] == '/' ? "" : "/", de->d_name);
        if (!stat(full, &st) && S_ISREG(st.st_mode)) err = add_path(m, cap, full, why, wl);
        free(full);
    }
    closedir(d);
    if (err) return err;
    if (m->nfiles == first)
        return tkp_why(why, wl, TKP_ERR_IO, "%s: no *.tokprof file in it", path);
    char **names = malloc((m->nfiles - first) * sizeof(*names));
    if (!names) return tkp_why(why, wl, TKP_ERR_NOMEM, "out of memory");
    for (size_t i = first; i < m->nfiles; i++)
        names[i - first] = m->files[i].path;
    qsort(names, m->nfiles - first, sizeof(*names), by_name);
    for (size_t i = first; i < m->nfiles; i++)
        m->files[i].path = names[i - first];
    free(names);
    return 0;
}

struct fkey {
    size_t file, leader; /* leader: the first file of its process key */
    long rot;
};

static int by_group(const void *a, const void *b)
{
    const struct fkey *x = a, *y = b;
    if (x->leader != y->leader) return x->leader < y->leader ? -1 : 1;
    if (x->rot != y->rot) return x->rot < y->rot ? -1 : 1;
    return x->file < y->file ? -1 : 1;
}

/* Groups the files by process key (rotation()): a process's rotated files follow each other
 * in rotation order, whether or not its first file is still there (TOKPROF_KEEP deletes old
 * ones). Groups come in the order of their first file. Quadratic in the number of files,
 * bounded by TKP_INPUTS_MAX. */
static int make_groups(struct tkp_mreader *m, char *why, size_t wl)
{
    struct fkey *k = calloc(m->nfiles, sizeof(*k));
    size_t *xlen = calloc(m->nfiles, sizeof(*xlen));
    struct mfile *sorted = malloc(m->nfiles * sizeof(*sorted));
    m->groups = calloc(m->nfiles, sizeof(*m->groups));
    if (!k || !xlen || !sorted || !m->groups) {
        free(k);
        free(xlen);
        free(sorted);
        return tkp_why(why, wl, TKP_ERR_NOMEM, "out of memory");
    }
    for (size_t j = 0; j < m->nfiles; j++) {
        const struct mfile *fj = &m->files[j];
        k[j].file = k[j].leader = j;
        k[j].rot = rotation(fj->path, fj->pid, &xlen[j]);
        for (size_t i = 0; k[j].rot >= 0 && i < j; i++)
            if (k[i].rot >= 0 && m->files[i].pid == fj->pid && xlen[i] == xlen[j] &&
                !memcmp(m->files[i].path, fj->path, xlen[j])) {
                k[j].leader = k[i].leader;
                break;
            }
    }
    qsort(k, m->nfiles, sizeof(*k), by_group);
    for (size_t x = 0; x < m->nfiles; x++) {
        sorted[x] = m->files[k[x].file];
        if (x && k[x].leader == k[x - 1].leader) {
            m->groups[m->ngroups - 1].nfiles++;
            continue;
        }
        struct mgroup *g = &m->groups[m->ngroups++];
        g->first = x;
        g->nfiles = 1;
        g->pid = sorted[x].pid;
    }
    free(k);
    free(xlen);
    free(m->files);
    m->files = sorted;
    return 0;
}

static const struct tkp_reader_ops merged_ops; /* the merge behind a struct tkp_reader */

static void merged_free(struct tkp_mreader *m)
{
    if (!m) return;
    for (size_t i = 0; i < m->ngroups; i++) {
        tkp_reader_close(m->groups[i].r);
        free(m->groups[i].tmap);
    }
    for (size_t i = 0; i < m->nfiles; i++) {
        tkp_reader_close(m->files[i].done);
        free(m->files[i].path);
    }
    free(m->groups);
    free(m->files);
    free(m);
}

int tkp_reader_open_many(const char *const *paths, size_t n, struct tkp_reader **r, char *why,
                         size_t whylen)
{
    struct stat st;
    *r = NULL;
    if (n == 0) return tkp_why(why, whylen, TKP_ERR_USAGE, "no capture given");
    if (n == 1 && (!strcmp(paths[0], "-") || stat(paths[0], &st) || !S_ISDIR(st.st_mode))) {
        char w[256];
        int err = tkp_reader_open(paths[0], r, w, sizeof(w));
        return err ? tkp_why(why, whylen, err, "%s: %s", paths[0], w) : 0;
    }
    struct tkp_mreader *m = calloc(1, sizeof(*m));
    if (!m) return tkp_why(why, whylen, TKP_ERR_NOMEM, "out of memory");
    size_t cap = 0;
    int err = 0;
    for (size_t i = 0; !err && i < n; i++)
        err = !strcmp(paths[i], "-")
                  ? tkp_why(why, whylen, TKP_ERR_USAGE, "stdin ('-') cannot be merged")
                  : add_input(m, &cap, paths[i], why, whylen);
    /* every file must at least be a capture: an unreadable one is a usage error up front,
     * not a warning halfway through the merge; its META pid says which process it is */
    for (size_t i = 0; !err && i < m->nfiles; i++) {
        struct tkp_reader *one;
        char w[256];
        if ((err = tkp_reader_open(m->files[i].path, &one, w, sizeof(w))))
            tkp_why(why, whylen, err, "%s: %s", m->files[i].path, w);
        else
            m->files[i].pid = meta_pid(one);
        tkp_reader_close(one);
    }
    if (!err) err = make_groups(m, why, whylen);
    if (!err && !(*r = tkp_reader_new_over(&merged_ops, m)))
        err = tkp_why(why, whylen, TKP_ERR_NOMEM, "out of memory");
    if (err) merged_free(m);
    return err;
}

/* ---- the merge ---- */

static int stop(struct tkp_mreader *m, int code, const char *msg)
{
    m->state = code;
    m->err.code = code;
    m->err.offset = 0;
    snprintf(m->err.msg, sizeof(m->err.msg), "%s", msg);
    return code;
}

static int has_thread(enum tkp_rec t)
{
    switch (t) {
    case TKP_REC_CHUNK:
    case TKP_REC_NAME:
    case TKP_REC_META:
    case TKP_REC_GRAPH:
    case TKP_REC_STACK:
    case TKP_REC_MODULE:
    case TKP_REC_GPU_INFO:
        return 0;
    default:
        return 1;
    }
}

/* The merged index of the group's thread t (t < TKP_THREADS_MAX: the record decoder checks). */
static int renumber(struct tkp_mreader *m, struct mgroup *g, uint32_t *t)
{
    if (*t == TKP_THREAD_NONE) return 0;
    if (*t >= g->tcap) {
        size_t cap = g->tcap;
        if (tkp_grow_zeroed((void **)&g->tmap, &cap, (size_t)*t + 1, sizeof(*g->tmap)))
            return stop(m, TKP_ERR_NOMEM, "out of memory");
        g->tcap = (uint32_t)cap;
    }
    if (!g->tmap[*t]) {
        if (m->nthreads + 1 >= TKP_THREADS_MAX)
            return stop(m, TKP_ERR_RECORD, "more than 65535 threads across the captures");
        g->tmap[*t] = ++m->nthreads;
    }
    *t = g->tmap[*t] - 1;
    return 0;
}

/* Graph ids are capture-local: merged, group g's id gets g in bits 48 and up, so two processes'
 * graph 1 stay apart (a real id is a small counter; larger ones are left as they are). */
static uint64_t graph_id(const struct tkp_mreader *m, const struct mgroup *g, uint64_t id)
{
    uint64_t gi = (uint64_t)(g - m->groups);
    return id == TKP_GRAPH_UNKNOWN || id >> 48 || !gi ? id : id | gi << 48;
}

static void renumber_graphs(const struct tkp_mreader *m, const struct mgroup *g,
                            struct tkp_record *rec)
{
    if (rec->type == TKP_REC_GRAPH) rec->graph.graph = graph_id(m, g, rec->graph.graph);
    if (rec->type == TKP_REC_GRAPH_LAUNCH)
        rec->graph_launch.graph = graph_id(m, g, rec->graph_launch.graph);
    if (rec->type == TKP_REC_GPU_KERNEL || rec->type == TKP_REC_GPU_COPY)
        rec->gpu.graph = graph_id(m, g, rec->gpu.graph);
}

/* Takes the group's next record as its head, opening its next file when one ends. */
static int advance(struct tkp_mreader *m, struct mgroup *g)
{
    g->has_head = 0;
    while (!g->ended) {
        struct mfile *f = &m->files[g->first + g->cur];
        if (!g->r) {
            f->reached = 1;
            /* it was a capture when opened: a failure now means it changed since */
            if (tkp_reader_open(f->path, &g->r, f->err.msg, sizeof(f->err.msg)))
                f->has_err = 1, f->err.code = TKP_ERR_IO;
        }
        int k = g->r ? tkp_reader_next(g->r, &g->head) : 0;
        if (k == 1) {
            struct tkp_record *rec = &g->head;
            if (rec->type == TKP_REC_META && rec->meta.pid) g->pid = rec->meta.pid;
            rec->pid = g->pid;
            /* not the CHUNK's base_ns: a writer may stamp it after the chunk's records */
            if (tkp_record_has_time(rec->type)) g->last = rec->host_ns;
            g->key = g->last;
            if (m->ngroups > 1 && has_thread(rec->type) && renumber(m, g, &rec->thread))
                return m->state;
            if (m->ngroups > 1) renumber_graphs(m, g, rec);
            g->has_head = 1;
            return 0;
        }
        if (g->r) {
            const struct tkp_reader_err *e = tkp_reader_error(g->r);
            if (e) f->has_err = 1, f->err = *e;
            f->st = *tkp_reader_stats(g->r);
            /* consumers may hold its name strings (reader.h): they live until our close */
            tkp_reader_release(g->r);
            f->done = g->r;
            g->r = NULL;
        }
        if (++g->cur == g->nfiles) g->ended = 1;
    }
    return 0;
}

static int merged_next(struct tkp_mreader *m, struct tkp_record *rec)
{
    if (m->state) return m->state < 0 ? m->state : 0;
    if (!m->pending) { /* the first call: every group takes its first head */
        for (size_t i = 0; i < m->ngroups; i++)
            if (advance(m, &m->groups[i])) return m->state;
    } else if (advance(m, m->pending)) {
        return m->state;
    }
    struct mgroup *best = NULL;
    for (size_t i = 0; i < m->ngroups; i++) {
        struct mgroup *g = &m->groups[i];
        if (g->has_head && (!best || g->key < best->key)) best = g;
    }
    if (!best) {
        m->state = 1;
        return 0;
    }
    m->pending = best;
    *rec = best->head;
    return 1;
}

static const struct tkp_reader_err *merged_error(const struct tkp_mreader *m)
{
    if (m->state < 0) return &m->err;
    for (size_t i = 0; i < m->ngroups; i++) /* the open readers first: they are current */
        if (m->groups[i].r && tkp_reader_error(m->groups[i].r))
            return tkp_reader_error(m->groups[i].r);
    for (size_t i = 0; i < m->nfiles; i++)
        if (m->files[i].has_err) return &m->files[i].err;
    return NULL;
}

static const struct tkp_reader_stats *merged_stats(const struct tkp_mreader *m)
{
    struct tkp_mreader *w = (struct tkp_mreader *)m; /* a cache of the sums */
    struct tkp_reader_stats s = {0};
    for (size_t i = 0; i < m->nfiles; i++) {
        const struct tkp_reader_stats *f = &m->files[i].st;
        for (size_t g = 0; g < m->ngroups; g++)
            if (m->groups[g].r && m->groups[g].first + m->groups[g].cur == i)
                f = tkp_reader_stats(m->groups[g].r);
        s.chunks += f->chunks;
        s.records += f->records;
        s.unknown_records += f->unknown_records;
        s.missing_names += f->missing_names;
        s.missing_threads += f->missing_threads;
    }
    w->stats = s;
    return &w->stats;
}

static uint32_t merged_flags(const struct tkp_mreader *m)
{
    (void)m;
    return TKP_FILE_STREAM;
}

static int ops_next(void *m, struct tkp_record *rec)
{
    return merged_next(m, rec);
}
static const struct tkp_reader_err *ops_error(const void *m)
{
    return merged_error(m);
}
static const struct tkp_reader_stats *ops_stats(const void *m)
{
    return merged_stats(m);
}
static uint32_t ops_flags(const void *m)
{
    return merged_flags(m);
}
static void ops_free(void *m)
{
    merged_free(m);
}
static const struct tkp_reader_ops merged_ops = {ops_next, ops_error, ops_stats, ops_flags,
                                                 ops_free};

size_t tkp_reader_nfiles(const struct tkp_reader *r)
{
    struct tkp_mreader *m = tkp_reader_impl(r, &merged_ops);
    return m ? m->nfiles : 1;
}

const struct tkp_reader_err *tkp_reader_file(const struct tkp_reader *r, size_t i,
                                             const char **path,
                                             const struct tkp_reader_stats **stats)
{
    struct tkp_mreader *m = tkp_reader_impl(r, &merged_ops);
    if (!m) {
        *path = NULL;
        if (stats) *stats = tkp_reader_stats(r);
        return tkp_reader_error(r);
    }
    *path = m->files[i].path;
    for (size_t g = 0; g < m->ngroups; g++)
        if (m->groups[g].r && m->groups[g].first + m->groups[g].cur == i) {
            if (stats) *stats = tkp_reader_stats(m->groups[g].r);
            return tkp_reader_error(m->groups[g].r);
        }
    if (stats) *stats = &m->files[i].st;
    return m->files[i].has_err ? &m->files[i].err : NULL;
}

int tkp_reader_is_merged(const struct tkp_reader *r)
{
    struct tkp_mreader *m = tkp_reader_impl(r, &merged_ops);
    return m && m->ngroups > 1;
}

size_t tkp_reader_ngroups(const struct tkp_reader *r)
{
    struct tkp_mreader *m = tkp_reader_impl(r, &merged_ops);
    return m ? m->ngroups : 1;
}

void tkp_reader_group(const struct tkp_reader *r, size_t g, size_t *first, size_t *n)
{
    struct tkp_mreader *m = tkp_reader_impl(r, &merged_ops);
    *first = m ? m->groups[g].first : 0;
    *n = m ? m->groups[g].nfiles : 1;
}
