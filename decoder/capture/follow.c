/* tokprof decoder: the follow reader (see follow.h).
 *
 * One plain reader per process, read until it has nothing more to give (0 or a torn tail), then
 * asked again later (tkp_reader_retry). A file is known complete only from outside it — the next
 * rotated file exists, or the writer is gone — and such a sign is looked for before the last read,
 * never after: a chunk written between the read and the look would otherwise be lost. */
#include "capture/follow.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/err.h"
#include "base/grow.h"
#include "base/map.h"

#define WARN_KEEP 8
#define WARN_LEN 320

struct fproc {
    char *path;     /* the file being read (owned) */
    char *stem;     /* "<dir>/<program>.<pid>" once the file's name is known to rotate, else NULL */
    unsigned index; /* rotation index of path */
    struct tkp_reader *r;
    uint64_t pid;                   /* META pid (0: not read yet) */
    int remote;                     /* META hostname is not ours: liveness unknown */
    int final;                      /* the file was known complete before the current read */
    int named;                      /* stem resolved (or known not to exist) */
    unsigned long long start_ticks; /* the writer's /proc start time at first look, 0 unknown */
    uint64_t far_ms;                /* when files beyond the next were last looked for */
    int pending;                    /* pend holds a record to deliver before reading on */
    int skip;                       /* tkp_follow_skip(): EXITED at the next turn */
    uint64_t source;                /* tkp_follow_source(): 1, 2, ... in the order followed */
    char *prev;                     /* the file before path, after a rotation (owned), else NULL */
    int prev_locked;                /* ... and its writer locked it (TKP_FILE_LOCKED) */
    struct tkp_record pend; /* the META read ahead so that the file's first CHUNK has a pid */
};

/* Interned name strings: a record's names point here rather than into its reader, whose strings
 * go when the reader closes at a rotation (consumers — the spec monitor's shape cache — key on
 * the pointers for the whole follow). Bounded by the distinct names, which rotations repeat. */
#define ICACHE 1024 /* reader string -> interned, direct-mapped, per reader generation */

struct tkp_follow {
    struct tkp_follow_opts o;
    char **it; /* interned name strings (owned), in order added */
    size_t itcap, itused, itbytes;
    struct tkp_map ix; /* it by content */
    struct {
        const char *from, *to;
        uint64_t gen;
    } icache[ICACHE];
    uint64_t gen; /* bumped whenever a reader closes: its pointers may come back as others */
    struct tkp_graph_node *nodes; /* a GRAPH record's nodes, names interned */
    size_t nodes_cap;
    char *dir;  /* the directory followed, NULL for a single capture */
    char *wdir; /* the directory inotify watches */
    int ino;    /* inotify fd, -1 */
    int dirty;  /* a directory event since the last scan */
    struct fproc *p;
    size_t np, capp, rr, batch;
    uint64_t sources, source; /* processes numbered so far; the last record's */
    char **known; /* directory mode: the file names of the last scan, sorted */
    size_t nknown;
    int seen; /* a process was followed at some point */
    uint64_t last_poll_ms;
    char warn[WARN_KEEP][WARN_LEN];
    size_t whead, nwarn;
    char cur_warn[WARN_LEN];
    char host[256];
    struct tkp_follow_stats st;
};

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

__attribute__((format(printf, 2, 3))) static void warnf(struct tkp_follow *f, const char *fmt, ...)
{
    f->st.warnings++;
    if (f->nwarn == WARN_KEEP) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->warn[(f->whead + f->nwarn) % WARN_KEEP], WARN_LEN, fmt, ap);
    va_end(ap);
    f->nwarn++;
}

/* 1 when the file is, or may become, a capture: a whole header with the magic, or a prefix of
 * the magic (the shim writes the header right after creating the file). */
static int looks_capture(const char *path, int *complete)
{
    unsigned char h[TKP_FILE_MAGIC_LEN];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    *complete = 0;
    if (fd < 0) return -1;
    ssize_t n = read(fd, h, sizeof(h));
    close(fd);
    if (n < 0) return -1;
    if (memcmp(h, TKP_FILE_MAGIC, (size_t)n)) return 0;
    *complete = n == (ssize_t)sizeof(h);
    return 1;
}

/* The writer's state from /proc/PID/stat: 1 running, 0 gone (or a zombie), and its start time. */
static int proc_alive(uint64_t pid, unsigned long long *start)
{
    char path[64], buf[1024];
    snprintf(path, sizeof(path), "/proc/%llu/stat", (unsigned long long)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return errno == ENOENT || errno == ESRCH ? 0 : 1;
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0) return 0;
    buf[n] = 0;
    /* "pid (comm) S ppid ..." — comm may hold spaces and parentheses: parse after the last ')' */
    char *p = strrchr(buf, ')');
    if (!p || p[1] != ' ') return 1;
    char state = p[2];
    if (state == 'Z' || state == 'X' || state == 'x') return 0;
    /* field 3 is the state; the start time is field 22 */
    p += 2;
    for (int field = 3; field < 22 && p; field++) {
        p = strchr(p, ' ');
        if (p) p++;
    }
    *start = p ? strtoull(p, NULL, 10) : 0;
    return 1;
}

static int writer_gone(struct tkp_follow *f, struct fproc *p)
{
    (void)f;
    /* the writer's lock says it, whatever its PID namespace or host name (reader.h); the
     * reader has the header's flags: a file without the lock is not opened again to learn it */
    int held = p->r && (tkp_reader_flags(p->r) & TKP_FILE_LOCKED) ? tkp_file_writer_active(p->path)
                                                                   : -1;
    if (held >= 0) return !held;
    if (!p->pid || p->remote) return 0;
    unsigned long long start = 0;
    if (!proc_alive(p->pid, &start)) return 1;
    if (!p->start_ticks) p->start_ticks = start;
    return start && start != p->start_ticks; /* the pid was reused: ours ended */
}

/* Finds the stem of p's file from its META pid: `<stem>.tokprof` with stem ending in `.<pid>`
 * (index 0), or `<stem>.<K>.tokprof` (index K). Any other name has no rotations. */
static void resolve_name(struct fproc *p)
{
    char tail[32];
    p->named = 1;
    size_t n = strlen(p->path), e;
    if (!p->pid || n <= 8 || strcmp(p->path + n - 8, ".tokprof")) return;
    e = n - 8;
    int t = snprintf(tail, sizeof(tail), ".%llu", (unsigned long long)p->pid);
    if ((size_t)t < e && !memcmp(p->path + e - t, tail, (size_t)t)) {
        p->stem = strndup(p->path, e);
        p->index = 0;
        return;
    }
    size_t b = e;
    while (b > 0 && p->path[b - 1] >= '0' && p->path[b - 1] <= '9')
        b--;
    if (b == e || e - b > 9 || b < (size_t)t + 1 || p->path[b - 1] != '.' ||
        memcmp(p->path + b - 1 - t, tail, (size_t)t))
        return;
    p->stem = strndup(p->path, b - 1);
    p->index = (unsigned)strtoul(p->path + b, NULL, 10);
}

static char *rotated_path(const struct fproc *p, unsigned index)
{
    size_t n = strlen(p->stem) + 32;
    char *s = malloc(n);
    if (!s) return NULL;
    if (index)
        snprintf(s, n, "%s.%u.tokprof", p->stem, index);
    else
        snprintf(s, n, "%s.tokprof", p->stem);
    return s;
}

/* The index of p's next file on disk (the lowest above p->index among the next `ahead`:
 * TOKPROF_KEEP may have deleted some if we fell far behind), 0 when none. */
static unsigned next_index(const struct fproc *p, unsigned ahead)
{
    struct stat st;
    if (!p->stem) return 0;
    for (unsigned k = p->index + 1; k <= p->index + ahead; k++) {
        char *s = rotated_path(p, k);
        int there = s && !stat(s, &st);
        free(s);
        if (there) return k;
    }
    return 0;
}

/* ---- interned names ---- */

static int eq_str(const void *ctx, uint32_t id, const void *key)
{
    return !strcmp(((const struct tkp_follow *)ctx)->it[id], key);
}

/* The interned copy of s; s itself when out of memory or past the bound (degraded: that name's
 * pointer is then only valid until its reader closes). */
static const char *intern(struct tkp_follow *f, const char *s)
{
    if (!s) return s;
    size_t slot = ((uintptr_t)s >> 3) % ICACHE;
    if (f->icache[slot].from == s && f->icache[slot].gen == f->gen + 1) return f->icache[slot].to;
    uint64_t h = tkp_fnv64_str(TKP_FNV64_SEED, s);
    if (tkp_map_reserve(&f->ix, f->itused + 1)) return s;
    struct tkp_map_slot *ms = tkp_map_probe(&f->ix, h, eq_str, f, s);
    const char *to = ms->id1 ? f->it[ms->id1 - 1] : NULL;
    if (!to) {
        size_t n = strlen(s) + 1;
        char *c = f->itbytes + n <= TKP_NAMES_MAX_BYTES ? malloc(n) : NULL;
        if (!c || TKP_GROW_FROM(f->it, f->itcap, f->itused + 1, 1024)) {
            free(c);
            return s;
        }
        memcpy(c, s, n);
        f->it[f->itused] = c;
        tkp_map_put(&f->ix, ms, h, (uint32_t)f->itused++);
        f->itbytes += n;
        to = c;
    }
    f->icache[slot].from = s;
    f->icache[slot].to = to;
    f->icache[slot].gen = f->gen + 1;
    return to;
}

static int intern_record(struct tkp_follow *f, struct tkp_record *r)
{
    switch (r->type) {
    case TKP_REC_NAME:
        r->name.str = intern(f, r->name.str);
        break;
    case TKP_REC_LAUNCH:
        r->launch.name = intern(f, r->launch.name);
        break;
    case TKP_REC_NVTX:
        r->nvtx.name = intern(f, r->nvtx.name);
        break;
    case TKP_REC_LIB_CALL:
        r->lib_call.op = intern(f, r->lib_call.op);
        break;
    case TKP_REC_GPU_KERNEL:
    case TKP_REC_GPU_COPY:
        r->gpu.name = intern(f, r->gpu.name);
        break;
    case TKP_REC_GRAPH:
        if (TKP_GROW(f->nodes, f->nodes_cap, r->graph.nnodes)) return TKP_ERR_NOMEM;
        for (uint32_t i = 0; i < r->graph.nnodes; i++) {
            f->nodes[i] = r->graph.nodes[i];
            f->nodes[i].name = intern(f, f->nodes[i].name);
        }
        r->graph.nodes = f->nodes;
        break;
    default:
        break;
    }
    return 0;
}

static void proc_free(struct fproc *p)
{
    tkp_reader_close(p->r);
    free(p->path);
    free(p->stem);
    free(p->prev);
}

static int add_proc(struct tkp_follow *f, const char *path)
{
    if (f->np == TKP_FOLLOW_PROCS_MAX) {
        warnf(f, "%s: more than %d processes followed at once: not followed", path,
              TKP_FOLLOW_PROCS_MAX);
        return 0;
    }
    if (TKP_GROW_FROM(f->p, f->capp, f->np + 1, 4)) return TKP_ERR_NOMEM;
    struct fproc *q = f->p;
    memset(&q[f->np], 0, sizeof(*q));
    if (!(q[f->np].path = strdup(path))) return TKP_ERR_NOMEM;
    q[f->np].source = ++f->sources;
    f->np++;
    f->seen = 1;
    f->st.processes++;
    return 0;
}

/* Opens p's reader once its file has a whole header. 1 open, 0 not yet, <0 not a capture. */
static int proc_open(struct tkp_follow *f, struct fproc *p)
{
    int complete;
    int c = looks_capture(p->path, &complete);
    if (c < 0 && errno == ENOENT) return TKP_ERR_IO;
    if (c <= 0) return c < 0 ? 0 : TKP_ERR_NOT_CAPTURE;
    if (!complete) return 0;
    char w[256];
    int err = tkp_reader_open(p->path, &p->r, w, sizeof(w));
    if (err == TKP_ERR_NOMEM) return err;
    if (err) {
        warnf(f, "%s: %s: not followed", p->path, w);
        return TKP_ERR_NOT_CAPTURE;
    }
    if (f->o.no_snapshots && (tkp_reader_flags(p->r) & TKP_FILE_SNAPSHOT)) {
        tkp_reader_close(p->r);
        p->r = NULL;
        return TKP_ERR_NOT_CAPTURE;
    }
    f->st.files++;
    return 1;
}

/* ---- directories ---- */

static int by_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int is_known(struct tkp_follow *f, const char *name)
{
    return f->nknown && bsearch(&name, f->known, f->nknown, sizeof(*f->known), by_str) != NULL;
}

/* 1 when `name` (in f->dir) is a rotated file of a followed process */
static int is_rotation(struct tkp_follow *f, const char *full)
{
    for (size_t i = 0; i < f->np; i++) {
        const char *s = f->p[i].stem;
        size_t n = s ? strlen(s) : 0;
        if (!n || strncmp(full, s, n) || full[n] != '.') continue;
        const char *d = full + n + 1;
        size_t k = strspn(d, "0123456789");
        if (k && !strcmp(d + k, ".tokprof")) return 1;
    }
    return 0;
}

/* Of the new names of one scan, the ones to follow: not `<S>.<K>.tokprof` (S ending in `.<pid>`)
 * when `<S>.tokprof` or `<S>.<J>.tokprof` (J < K) is new too (the process of the lower one reads
 * on into it). */
static int shadowed(char **names, size_t n, const char *x)
{
    size_t len = strlen(x);
    if (len <= 8) return 0;
    size_t e = len - 8, b = e;
    while (b > 0 && x[b - 1] >= '0' && x[b - 1] <= '9')
        b--;
    if (b == e || b == 0 || x[b - 1] != '.') return 0;
    size_t slen = b - 1, d = slen;
    /* a rotated file is `<program>.<pid>.<K>`: its stem ends in a number too */
    while (d > 0 && x[d - 1] >= '0' && x[d - 1] <= '9')
        d--;
    if (d == slen || d == 0 || x[d - 1] != '.') return 0;
    unsigned long k = strtoul(x + b, NULL, 10);
    for (size_t i = 0; i < n; i++) {
        const char *y = names[i];
        if (y == x || strncmp(y, x, slen)) continue;
        if (!strcmp(y + slen, ".tokprof")) return 1;
        if (y[slen] != '.') continue;
        char *end;
        unsigned long j = strtoul(y + slen + 1, &end, 10);
        if (end != y + slen + 1 && !strcmp(end, ".tokprof") && j < k) return 1;
    }
    return 0;
}

static int scan(struct tkp_follow *f)
{
    DIR *d = opendir(f->dir);
    if (!d) return 0; /* gone for a moment: what is followed goes on */
    char **names = NULL, **fresh = NULL;
    size_t n = 0, cap = 0, nfresh = 0;
    int err = 0;
    for (struct dirent *de; !err && (de = readdir(d));) {
        size_t len = strlen(de->d_name);
        if (de->d_name[0] == '.' || len <= 8 || strcmp(de->d_name + len - 8, ".tokprof")) continue;
        if (TKP_GROW_FROM(names, cap, n + 1, 64)) {
            err = TKP_ERR_NOMEM;
            break;
        }
        if (!(names[n] = strdup(de->d_name)))
            err = TKP_ERR_NOMEM;
        else
            n++;
    }
    closedir(d);
    if (!err && n && !(fresh = malloc(n * sizeof(*fresh)))) err = TKP_ERR_NOMEM;
    for (size_t i = 0; !err && i < n; i++)
        if (!is_known(f, names[i])) fresh[nfresh++] = names[i];
    if (nfresh) qsort(fresh, nfresh, sizeof(*fresh), by_str);
    for (size_t i = 0; !err && i < nfresh; i++) {
        if (shadowed(fresh, nfresh, fresh[i])) continue;
        size_t plen = strlen(f->dir);
        char *full = malloc(plen + strlen(fresh[i]) + 2);
        if (!full) {
            err = TKP_ERR_NOMEM;
            break;
        }
        sprintf(full, "%s%s%s", f->dir, plen && f->dir[plen - 1] == '/' ? "" : "/", fresh[i]);
        struct stat st;
        if (!is_rotation(f, full) && !stat(full, &st) && S_ISREG(st.st_mode))
            err = add_proc(f, full);
        free(full);
    }
    free(fresh);
    for (size_t i = 0; i < f->nknown; i++)
        free(f->known[i]);
    free(f->known);
    if (n) qsort(names, n, sizeof(*names), by_str);
    f->known = names;
    f->nknown = n;
    f->dirty = 0;
    return err;
}

/* ---- opening ---- */

int tkp_follow_open(const char *path, const struct tkp_follow_opts *opts, struct tkp_follow **out,
                    char *why, size_t wl)
{
    struct stat st;
    *out = NULL;
    if (stat(path, &st)) return tkp_why(why, wl, TKP_ERR_IO, "%s: %s", path, strerror(errno));
    if (!S_ISDIR(st.st_mode)) {
        int complete;
        int c = looks_capture(path, &complete);
        if (c < 0) return tkp_why(why, wl, TKP_ERR_IO, "%s: %s", path, strerror(errno));
        if (!c)
            return tkp_why(why, wl, TKP_ERR_NOT_CAPTURE, "%s: not a tokprof capture (bad magic)",
                           path);
    }
    struct tkp_follow *f = calloc(1, sizeof(*f));
    if (!f) return tkp_why(why, wl, TKP_ERR_NOMEM, "out of memory");
    if (opts) f->o = *opts;
    if (!f->o.poll_ms) f->o.poll_ms = TKP_FOLLOW_POLL_MS;
    f->ino = -1;
    if (gethostname(f->host, sizeof(f->host) - 1)) f->host[0] = 0;
    int err = 0;
    if (S_ISDIR(st.st_mode)) {
        if (!(f->dir = strdup(path)) || !(f->wdir = strdup(path))) err = TKP_ERR_NOMEM;
    } else {
        const char *slash = strrchr(path, '/');
        f->wdir = slash ? strndup(path, (size_t)(slash - path + 1)) : strdup(".");
        if (!f->wdir)
            err = TKP_ERR_NOMEM;
        else
            err = add_proc(f, path);
    }
    if (!err && !f->o.no_inotify) {
        f->ino = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
        /* a directory watch sees its files' writes as well as new files */
        if (f->ino >= 0 && inotify_add_watch(f->ino, f->wdir,
                                             IN_MODIFY | IN_CREATE | IN_MOVED_TO | IN_CLOSE_WRITE |
                                                 IN_DELETE) < 0) {
            close(f->ino);
            f->ino = -1; /* too many watches, a file system without inotify: poll */
        }
    }
    if (!err && f->dir) err = scan(f);
    if (err) {
        tkp_follow_close(f);
        return tkp_why(why, wl, err, "out of memory");
    }
    f->last_poll_ms = now_ms();
    *out = f;
    return 0;
}

void tkp_follow_close(struct tkp_follow *f)
{
    if (!f) return;
    for (size_t i = 0; i < f->np; i++)
        proc_free(&f->p[i]);
    free(f->p);
    for (size_t i = 0; i < f->nknown; i++)
        free(f->known[i]);
    free(f->known);
    if (f->ino >= 0) close(f->ino);
    for (size_t i = 0; i < f->itused; i++)
        free(f->it[i]);
    free(f->it);
    tkp_map_free(&f->ix);
    free(f->nodes);
    free(f->dir);
    free(f->wdir);
    free(f);
}

int tkp_follow_fd(const struct tkp_follow *f)
{
    return f->ino;
}

const char *tkp_follow_warning(struct tkp_follow *f)
{
    if (!f->nwarn) return NULL;
    memcpy(f->cur_warn, f->warn[f->whead], WARN_LEN);
    f->whead = (f->whead + 1) % WARN_KEEP;
    f->nwarn--;
    return f->cur_warn;
}

const struct tkp_follow_stats *tkp_follow_stats(const struct tkp_follow *f)
{
    return &f->st;
}

int tkp_follow_skip(struct tkp_follow *f, uint64_t source)
{
    for (size_t i = 0; i < f->np; i++)
        if (f->p[i].source == source) {
            f->p[i].skip = 1;
            return 0;
        }
    return -1;
}

uint64_t tkp_follow_source(const struct tkp_follow *f)
{
    return f->source;
}

size_t tkp_follow_nprocs(const struct tkp_follow *f)
{
    return f->np;
}

/* ---- reading ---- */

static void drop_proc(struct tkp_follow *f, size_t i)
{
    f->gen++;
    proc_free(&f->p[i]);
    f->p[i] = f->p[--f->np];
    if (f->rr >= f->np) f->rr = 0;
    f->batch = 0;
}

/* Process i ended (or is skipped): dropped, reported EXITED with its pid. */
static int proc_exited(struct tkp_follow *f, size_t i, struct tkp_record *rec, int *gone)
{
    memset(rec, 0, sizeof(*rec));
    rec->pid = f->p[i].pid;
    drop_proc(f, i);
    *gone = 1;
    f->st.exited++;
    return TKP_FOLLOW_EXITED;
}

/* 1 when p's file, a rotation whose header is not whole, never will be: its writer ended between
 * creating it and writing the header. The shim creates the next file, header and all, before it
 * closes (and unlocks) the last one; so the last one's lock free while this header is still not
 * whole (looked at again after the lock) means the writer is gone. Files of older shims: by pid. */
static int headless_end(struct tkp_follow *f, struct fproc *p)
{
    if (!p->prev) return 0; /* a first file: nothing tells its writer */
    int held = p->prev_locked ? tkp_file_writer_active(p->prev) : -1, complete;
    int ended = held >= 0 ? !held : writer_gone(f, p);
    return ended && !(looks_capture(p->path, &complete) == 1 && complete);
}

/* One process's next record: RECORD, EXITED (p dropped: *gone set), IDLE (nothing yet) or NOMEM. */
static int proc_next(struct tkp_follow *f, size_t i, struct tkp_record *rec, int *gone)
{
    struct fproc *p = &f->p[i];
    *gone = 0;
    f->source = p->source;
    if (p->skip) return proc_exited(f, i, rec, gone);
    for (;;) {
        if (!p->r) {
            int k = proc_open(f, p);
            if (k == TKP_ERR_NOMEM) return k;
            if (k < 0) { /* vanished before its header, or not a capture */
                drop_proc(f, i);
                *gone = 1;
                return TKP_FOLLOW_IDLE;
            }
            if (k == 0 && headless_end(f, p)) {
                warnf(f, "%s: no header: its writer ended before it wrote one", p->path);
                return proc_exited(f, i, rec, gone);
            }
            if (k == 0) return TKP_FOLLOW_IDLE;
        }
        if (p->pending) {
            *rec = p->pend;
            p->pending = 0;
            if (intern_record(f, rec)) return TKP_ERR_NOMEM;
            return TKP_FOLLOW_RECORD;
        }
        int k = tkp_reader_next(p->r, rec);
        if (k == 1 && !p->pid && rec->type == TKP_REC_CHUNK) {
            /* the first chunk: CHUNK, then META. Read META ahead (it stays valid: the reader is
             * not called again before it is delivered) so that every record carries its pid */
            k = tkp_reader_next(p->r, &p->pend);
            if (k == 1) {
                p->pending = 1;
                if (p->pend.type == TKP_REC_META) {
                    p->pid = p->pend.meta.pid;
                    p->pend.pid = rec->pid = p->pid;
                }
            }
            k = 1;
        }
        if (k == 1) {
            if (!rec->pid) rec->pid = p->pid; /* a rotated file's first CHUNK */
            if (rec->type == TKP_REC_META && !p->pid) p->pid = rec->meta.pid;
            if (rec->type == TKP_REC_META && rec->meta.hostname[0] && f->host[0])
                p->remote = strcmp(rec->meta.hostname, f->host) != 0;
            if (intern_record(f, rec)) return TKP_ERR_NOMEM;
            return TKP_FOLLOW_RECORD;
        }
        if (k == TKP_ERR_NOMEM) return k;
        if (!p->named && p->pid) resolve_name(p);
        const struct tkp_reader_err *e = tkp_reader_error(p->r);
        int bad = k < 0 && k != TKP_ERR_TORN;
        if (!p->final && !bad) {
            /* look for the signs of a complete file first, then read to the end once more */
            /* at every end of data one stat and one read of /proc; further files (the next
             * deleted by TOKPROF_KEEP: we fell that far behind) once a second */
            uint64_t t = now_ms();
            unsigned ahead = t - p->far_ms >= 1000 ? 64 : 1;
            if (ahead > 1) p->far_ms = t;
            p->final = next_index(p, ahead) || writer_gone(f, p);
            tkp_reader_retry(p->r);
            f->st.retries++;
            if (p->final) continue;
            return TKP_FOLLOW_IDLE;
        }
        if (e && e->code == TKP_ERR_TORN)
            warnf(f, "%s: torn tail at byte %llu (%s): followed up to there", p->path,
                  (unsigned long long)e->offset, e->msg);
        else if (e)
            warnf(f, "%s: bad chunk at byte %llu (%s): the rest of this file is skipped", p->path,
                  (unsigned long long)e->offset, e->msg);
        unsigned nx = next_index(p, 64);
        if (nx) {
            char *np = rotated_path(p, nx);
            if (!np) return TKP_ERR_NOMEM;
            if (nx > p->index + 1)
                warnf(f, "%s: files %u to %u were deleted before they were read", p->stem,
                      p->index + 1, nx - 1);
            free(p->prev);
            p->prev = p->path;
            p->prev_locked = (tkp_reader_flags(p->r) & TKP_FILE_LOCKED) != 0;
            tkp_reader_close(p->r);
            f->gen++;
            p->r = NULL;
            p->path = np;
            p->index = nx;
            p->final = 0;
            f->st.rotations++;
            continue;
        }
        if (bad && !writer_gone(f, p)) {
            /* a bad chunk in a file whose writer lives on: wait for its next file */
            return TKP_FOLLOW_IDLE;
        }
        return proc_exited(f, i, rec, gone);
    }
}

/* One pass over the processes from the current one; IDLE when none has anything. */
static int round_robin(struct tkp_follow *f, struct tkp_record *rec)
{
    for (size_t tried = 0; tried < f->np + 1 && f->np;) {
        if (f->rr >= f->np) f->rr = 0;
        int gone;
        int k = proc_next(f, f->rr, rec, &gone);
        if (k == TKP_FOLLOW_RECORD && ++f->batch < TKP_FOLLOW_BATCH) return k;
        if (k == TKP_FOLLOW_RECORD) {
            f->batch = 0;
            f->rr++;
            return k;
        }
        if (k != TKP_FOLLOW_IDLE) return k;
        if (!gone) f->rr++;
        f->batch = 0;
        tried++;
    }
    return TKP_FOLLOW_IDLE;
}

static void drain_inotify(struct tkp_follow *f)
{
    char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
    for (;;) {
        ssize_t n = read(f->ino, buf, sizeof(buf));
        if (n <= 0) break;
        for (char *q = buf; q < buf + n;) {
            struct inotify_event *ev = (struct inotify_event *)q;
            if (ev->mask & (IN_CREATE | IN_MOVED_TO | IN_Q_OVERFLOW)) f->dirty = 1;
            q += sizeof(*ev) + ev->len;
        }
    }
}

int tkp_follow_next(struct tkp_follow *f, struct tkp_record *rec, int timeout_ms)
{
    uint64_t deadline = now_ms() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0);
    for (;;) {
        int k = round_robin(f, rec);
        if (k != TKP_FOLLOW_IDLE) return k;
        if (f->o.until_exit && f->seen && !f->np) return TKP_FOLLOW_END;
        uint64_t now = now_ms();
        if (f->dir && (f->dirty || now - f->last_poll_ms >= f->o.poll_ms)) {
            if ((k = scan(f))) return k;
            f->last_poll_ms = now;
            if (f->np) continue;
        }
        if (now >= deadline) return TKP_FOLLOW_IDLE;
        uint64_t wait = deadline - now;
        if (wait > f->o.poll_ms) wait = f->o.poll_ms;
        if (f->ino >= 0) {
            struct pollfd pf = {.fd = f->ino, .events = POLLIN};
            if (poll(&pf, 1, (int)wait) > 0) drain_inotify(f);
        } else {
            struct timespec ts = {(time_t)(wait / 1000), (long)(wait % 1000) * 1000000L};
            nanosleep(&ts, NULL);
        }
        if (!f->dir) f->last_poll_ms = now_ms();
    }
}
