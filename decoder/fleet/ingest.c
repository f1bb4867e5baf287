/* tokprof decoder: continuous ingest into ClickHouse (see ingest.h). */
#include "fleet/ingest.h"
#include "fleet/table_rows.h"
#include "fleet/tail.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/err.h"
#include "base/grow.h"
#include "capture/follow.h"
#include "capture/reader.h"

struct entry {
    uint64_t cid, rows, batch, at;
    int table, done;
};

struct state {
    struct entry *e;
    size_t n, cap;
    int fd;
};

struct membuf {
    uint8_t *p;
    size_t len, cap;
};

static int sink_mem(void *arg, const void *buf, size_t n)
{
    struct membuf *b = arg;
    if (TKP_GROW(b->p, b->cap, b->len + n)) return TKP_ERR_NOMEM;
    memcpy(b->p + b->len, buf, n);
    b->len += n;
    return 0;
}

static void say(struct tkp_ingest *in, int warn, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void say(struct tkp_ingest *in, int warn, const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    if (in->say) in->say(in->arg, warn, line);
}

static void nap_ms(unsigned ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) && errno == EINTR) {
    }
}

/* ---- the state file ---- */

/* The entry of (capture, table, batch); table -1: any table of the batch. */
static struct entry *find(struct state *s, uint64_t cid, int table, uint64_t batch)
{
    for (size_t i = s->n; i-- > 0;)
        if (s->e[i].cid == cid && (table < 0 || s->e[i].table == table) &&
            s->e[i].batch == batch)
            return &s->e[i];
    return NULL;
}

static int note(struct state *s, uint64_t cid, int table, uint64_t rows, uint64_t batch,
                uint64_t at, int done)
{
    struct entry *e = find(s, cid, table, batch);
    if (!e) {
        if (TKP_GROW(s->e, s->cap, s->n + 1)) return TKP_ERR_NOMEM;
        e = &s->e[s->n++];
    }
    *e = (struct entry){cid, rows, batch, at, table, done};
    return 0;
}

static int state_open(struct state *s, const char *path, char *why, size_t wl)
{
    memset(s, 0, sizeof(*s));
    FILE *f = fopen(path, "r");
    char line[256], word[8], tab[32];
    unsigned long long cid, rows, batch, at;
    long whole = 0; /* the bytes of the whole lines */
    for (unsigned ln = 1; f && fgets(line, sizeof(line), f); ln++) {
        int t, k;
        /* a line cut by a kill mid-write has no newline: it never happened */
        if (!strchr(line, '\n')) break;
        whole = ftell(f);
        batch = 1, at = 0; /* a whole capture's line has neither */
        k = sscanf(line, "%7s %llx %31s %llu %llu %llu", word, &cid, tab, &rows, &batch, &at);
        if ((k != 4 && k != 6) || !batch || (t = tkp_tab_find(tab)) < 0 ||
            (strcmp(word, "begin") && strcmp(word, "done"))) {
            fclose(f);
            return tkp_why(why, wl, TKP_ERR_USAGE, "%s:%u: not a tokprof ingest state line", path,
                           ln);
        }
        if (note(s, cid, t, rows, batch, at, word[0] == 'd')) {
            fclose(f);
            return tkp_why(why, wl, TKP_ERR_NOMEM, "out of memory");
        }
    }
    if (f) fclose(f);
    s->fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (s->fd < 0) return tkp_why(why, wl, TKP_ERR_IO, "%s: %s", path, strerror(errno));
    /* a torn last line (no newline) never happened: cut off, so that the next line does not
     * follow it (ending it with a newline made it a bad line for the run after next) */
    struct stat st;
    if (!fstat(s->fd, &st) && st.st_size > whole && ftruncate(s->fd, whole))
        return tkp_why(why, wl, TKP_ERR_IO, "%s: %s", path, strerror(errno));
    return 0;
}

/* One batch of one table of one capture: what is sent and where it was cut. */
struct send {
    uint64_t cid;
    int table;
    uint64_t rows, batch, at;
};

static int record(struct state *s, const struct send *x, int done, char *why, size_t wl)
{
    char line[160];
    int n = snprintf(line, sizeof(line), "%s %016llx %s %llu %llu %llu\n", done ? "done" : "begin",
                     (unsigned long long)x->cid, tkp_tab_name(x->table),
                     (unsigned long long)x->rows, (unsigned long long)x->batch,
                     (unsigned long long)x->at);
    if (write(s->fd, line, (size_t)n) != n || fsync(s->fd))
        return tkp_why(why, wl, TKP_ERR_IO, "state file: %s", strerror(errno));
    return note(s, x->cid, x->table, x->rows, x->batch, x->at, done)
               ? tkp_why(why, wl, TKP_ERR_NOMEM, "out of memory")
               : 0;
}

/* ---- requests ---- */

enum { OK = 0, RETRY = 1 };

/* ClickHouse error codes that mean a shard is unreachable for now. */
static int retryable(const char *reply)
{
    static const char *const codes[] = {"Code: 159,", "Code: 209,", "Code: 210,", "Code: 279,"};
    for (size_t i = 0; i < sizeof(codes) / sizeof(*codes); i++)
        if (strstr(reply, codes[i])) return 1;
    return 0;
}

/* One request: OK with *reply, RETRY (what happened in *wait), or a fatal tkp_err with why. */
static int request(struct tkp_ingest *in, const char *q, const char *hdr, const void *body,
                   size_t n, char **reply, char *wait, size_t waitlen, char *why, size_t wl)
{
    int status;
    char *r;
    int err = tkp_http_post(&in->url, q, hdr, body, n, &status, &r, wait, waitlen);
    if (err == TKP_ERR_NOMEM) return tkp_why(why, wl, err, "out of memory");
    if (err) return RETRY;
    if (status == 200) {
        *reply = r;
        return OK;
    }
    char *nl = strchr(r, '\n');
    if (nl) *nl = '\0';
    if (retryable(r)) {
        snprintf(wait, waitlen, "server: %.200s", r);
        free(r);
        return RETRY;
    }
    err = tkp_why(why, wl, TKP_ERR_IO, "server said (HTTP %d): %.400s", status, r);
    free(r);
    return err;
}

static void backoff(struct tkp_ingest *in, unsigned *ms, const char *what, const char *wait)
{
    say(in, 0, "waiting for ClickHouse at %s:%s to %s (%s); retrying in %.1f s", in->url.host,
        in->url.port, what, wait, *ms / 1000.0);
    nap_ms(*ms);
    *ms = *ms * 2 > TKP_INGEST_BACKOFF_MAX_MS ? TKP_INGEST_BACKOFF_MAX_MS : *ms * 2;
}

/* The rows of capture cid in the table, batch 1, now on the server (retried until answered). */
static int server_rows(struct tkp_ingest *in, const struct send *x, uint64_t *rows, char *why,
                       size_t wl)
{
    char sql[256], q[768], wait[256];
    unsigned ms = 500;
    snprintf(sql, sizeof(sql),
             "SELECT count() FROM %s.%s WHERE capture_id = %llu AND ingest_batch = %llu", in->db,
             tkp_tab_name(x->table), (unsigned long long)x->cid, (unsigned long long)x->batch);
    strcpy(q, "/?query=");
    tkp_url_encode(sql, q + 8, sizeof(q) - 8);
    for (;;) {
        char *r = NULL;
        int k = request(in, q, NULL, "", 0, &r, wait, sizeof(wait), why, wl);
        if (k == OK) {
            *rows = strtoull(r, NULL, 10);
            free(r);
            return 0;
        }
        if (k < 0) return k;
        backoff(in, &ms, "count stored rows", wait);
    }
}

static int insert(struct tkp_ingest *in, struct state *st, const struct send *x,
                  const struct membuf *body, int pending, char *why, size_t wl)
{
    int ncols, err, table = x->table;
    uint64_t rows = x->rows, cid = x->cid;
    const struct tkp_tab_col *cols = tkp_tab_cols(table, &ncols);
    size_t cap = 16384;
    char *sql = malloc(cap), *q = malloc(3 * cap + 256), wait[256];
    if (!sql || !q) {
        free(sql), free(q);
        return tkp_why(why, wl, TKP_ERR_NOMEM, "out of memory");
    }
    int k = snprintf(sql, cap, "INSERT INTO %s.%s (", in->db, tkp_tab_name(table));
    for (int c = 0; c < ncols; c++)
        k += snprintf(sql + k, cap - (size_t)k, "%s%s", c ? ", " : "", cols[c].name);
    snprintf(sql + k, cap - (size_t)k, ") FORMAT TSVWithNames");
    strcpy(q, "/?query=");
    tkp_url_encode(sql, q + 8, 3 * cap);
    /* one block: the server stores the capture's rows as one part, whole or not at all */
    snprintf(q + strlen(q), 256, "&insert_distributed_sync=1&max_insert_block_size=%llu",
             (unsigned long long)(rows + 1 > 1048576 ? rows + 1 : 1048576));
    unsigned ms = 500;
    for (err = 0;;) {
        if (pending) { /* a send whose outcome is unknown: did the rows land? */
            uint64_t have;
            if ((err = server_rows(in, x, &have, why, wl))) break;
            if (have == rows) break;
            if (have) {
                err = tkp_why(why, wl, TKP_ERR_IO,
                              "capture %016llx: the server has %llu %s rows of batch %llu, "
                              "expected 0 or %llu: not sending (remove them, or the state file's "
                              "line)",
                              (unsigned long long)cid, (unsigned long long)have,
                              tkp_tab_name(table), (unsigned long long)x->batch,
                              (unsigned long long)rows);
                break;
            }
        }
        if (!pending && (err = record(st, x, 0, why, wl))) break;
        pending = 1;
        char *r = NULL;
        k = request(in, q, "Content-Encoding: gzip\r\n", body->p, body->len, &r, wait, sizeof(wait),
                    why, wl);
        free(r);
        if (k == OK) break;
        if (k < 0) {
            err = k;
            break;
        }
        backoff(in, &ms, "store rows", wait);
    }
    free(sql), free(q);
    return err ? err : record(st, x, 1, why, wl);
}

/* ---- whole captures (inputs, snapshots) ---- */

/* 1 when the capture's files are whole: their writer let go of its lock (reader.h), or, for files
 * that do not say (an older shim), none changed for --settle seconds. */
static int settled(const struct tkp_ingest *in, const char *const *files, size_t n)
{
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    for (size_t i = 0; i < n; i++) {
        struct stat st;
        int held = tkp_file_writer_active(files[i]);
        if (held == 1) return 0;
        if (held == 0) continue;
        if (stat(files[i], &st)) return 0;
        double age = (double)(now.tv_sec - st.st_mtim.tv_sec) +
                     (double)(now.tv_nsec - st.st_mtim.tv_nsec) / 1e9;
        if (age < in->settle_s) return 0;
    }
    return 1;
}

/* 1 when the capture is all stored: every table done in the batch that sent kernels (the last). */
static int all_done(struct state *st, uint64_t cid)
{
    for (size_t i = st->n; i-- > 0;) {
        const struct entry *k = &st->e[i];
        if (k->cid != cid || k->table != TKP_TAB_KERNELS || !k->done) continue;
        for (int t = 0; t < TKP_TAB_COUNT; t++) {
            struct entry *e = find(st, cid, t, k->batch);
            if (!e || !e->done) return 0;
        }
        return 1;
    }
    return 0;
}

/* Sends the tables of one batch whose outs are set (bodies in body[]): a table without rows is
 * only noted done. */
static int send_batch(struct tkp_ingest *in, struct state *st, uint64_t cid, uint64_t batch,
                      uint64_t at, struct tkp_tab_out **outs, struct membuf *body, char *why,
                      size_t wl)
{
    int err = 0;
    for (int t = 0; !err && t < TKP_TAB_COUNT; t++) {
        if (!outs[t]) continue;
        if ((err = tkp_tab_out_finish(outs[t]))) return tkp_why(why, wl, err, "out of memory");
        struct send x = {cid, t, tkp_tab_rows(outs[t]), batch, at};
        struct entry *e = find(st, cid, t, batch);
        if (!x.rows)
            err = record(st, &x, 1, why, wl);
        else
            err = insert(in, st, &x, &body[t], e != NULL, why, wl);
        if (!err) in->rows += x.rows;
    }
    return err;
}

/* The outs of the tables of `mask` not yet done in the batch (gzip'd TSV into body[]). */
static int batch_outs(struct state *st, uint64_t cid, uint64_t batch, unsigned mask,
                      struct tkp_tab_out **outs, struct membuf *body)
{
    int ncols;
    for (int t = 0; t < TKP_TAB_COUNT; t++) {
        struct entry *e = find(st, cid, t, batch);
        if (!(mask >> t & 1) || (e && e->done)) continue;
        const struct tkp_tab_col *cols = tkp_tab_cols(t, &ncols);
        if (tkp_tab_out_new(cols, ncols, TKP_FMT_TSV, TKP_Z_GZIP, 0, sink_mem, &body[t], &outs[t]))
            return TKP_ERR_NOMEM;
    }
    return 0;
}

static void outs_free(struct tkp_tab_out **outs, struct membuf *body)
{
    for (int t = 0; t < TKP_TAB_COUNT; t++)
        tkp_tab_out_free(outs[t]), free(body[t].p), outs[t] = NULL, body[t] = (struct membuf){0};
}

static int is_snapshot(const char *path)
{
    struct tkp_reader *r;
    if (tkp_reader_open(path, &r, NULL, 0)) return 0;
    int snap = (tkp_reader_flags(r) & TKP_FILE_SNAPSHOT) != 0;
    tkp_reader_close(r);
    return snap;
}

/* One whole capture: its tables not yet done, as batch 1. ++*pending when it is not ready yet. */
static int capture(struct tkp_ingest *in, struct state *st, const char *const *files, size_t n,
                   int *pending, char *why, size_t wl)
{
    uint64_t cid;
    if (tkp_tab_capture_id(files[0], &cid)) return 0; /* listed as a capture a moment ago */
    if (all_done(st, cid)) {
        in->stored += !in->watch; /* counted once: the inputs are read once, snapshots each poll */
        return 0;
    }
    if (!settled(in, files, n)) {
        ++*pending;
        return 0;
    }
    struct membuf body[TKP_TAB_COUNT] = {0};
    struct tkp_tab_out *outs[TKP_TAB_COUNT] = {0};
    struct tkp_tab_ident id = *in->id;
    struct tkp_tab_info info;
    int err = batch_outs(st, cid, 1, (1u << TKP_TAB_COUNT) - 1, outs, body);
    id.batch = 1;
    if (err) err = tkp_why(why, wl, err, "out of memory");
    if (!err && (err = tkp_tab_capture(files, n, in->cl, &id, outs, &info, why, wl))) {
        if (err != TKP_ERR_NOMEM) { /* not a capture any more: named, skipped */
            say(in, 1, "%s: skipped", why);
            in->skipped++;
            err = 0;
        }
        goto out;
    }
    if (info.torn) say(in, 1, "%s: decoded up to there", info.torn_why);
    if (!(err = send_batch(in, st, cid, 1, 0, outs, body, why, wl))) in->captures++;
out:
    outs_free(outs, body);
    return err;
}

/* The inputs given (watch: NULL) or, with snaps, the snapshots in the watched directory. */
static int round_(struct tkp_ingest *in, struct state *st, const char *watch, int *pending,
                  int last, char *why, size_t wl)
{
    const char *inputs[TKP_INGEST_INPUTS_MAX + 1];
    size_t n = 0;
    struct tkp_tab_groups g;
    for (size_t i = 0; !watch && i < in->ninputs && n < TKP_INGEST_INPUTS_MAX; i++)
        inputs[n++] = in->inputs[i];
    if (watch) inputs[n++] = watch;
    *pending = 0;
    if (!n) return 0;
    int err = tkp_tab_groups(inputs, n, &g, why, wl);
    if (err) return err;
    for (size_t i = 0; !err && i < g.ngroups; i++) {
        const char *const *files = (const char *const *)g.files + g.first[i];
        if (watch && !is_snapshot(files[0])) continue; /* followed chunk by chunk */
        err = capture(in, st, files, g.first[i + 1] - g.first[i], pending, why, wl);
    }
    /* unreadable inputs: once, at the end (while watching, a file being created is one) */
    for (char *line = g.bad, *nl; !err && last && !watch && line && *line; line = nl + 1) {
        nl = strchr(line, '\n');
        *nl = '\0';
        say(in, 1, "%s: skipped", line);
        in->skipped++;
    }
    tkp_tab_groups_free(&g);
    return err;
}

/* ---- live captures (--watch): chunk by chunk ---- */

struct live {
    uint64_t src, cid; /* src: the follow reader's source (two captures of one pid are two) */
    int has_cid, skip; /* skip: stored whole already, not read on (tkp_follow_skip) */
    struct tkp_tab_tail *t;
    uint64_t nrec;    /* records added */
    uint64_t batch;   /* batches cut */
    uint64_t last_at; /* nrec at the last cut */
    uint64_t next_at; /* where the state file's next batch was cut (replay), UINT64_MAX none */
    int next_final;   /* that batch is the last (it sent kernels) */
    double cut_s;     /* when the last cut was made (CLOCK_MONOTONIC s) */
};

static double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void next_recorded(struct state *st, struct live *l)
{
    struct entry *e = find(st, l->cid, -1, l->batch + 1);
    l->next_at = e ? e->at : UINT64_MAX;
    l->next_final = e && find(st, l->cid, TKP_TAB_KERNELS, l->batch + 1) != NULL;
}

/* The capture's files in the watched directory (for the moe pass): calls fn on them. */
static int moe_rows(struct tkp_ingest *in, uint64_t cid, const struct tkp_tab_ident *id,
                    struct tkp_tab_out *out, char *why, size_t wl)
{
    struct tkp_tab_groups g;
    const char *dir = in->watch;
    int err = tkp_tab_groups(&dir, 1, &g, why, wl), found = 0;
    for (size_t i = 0; !err && !found && i < g.ngroups; i++) {
        const char *const *files = (const char *const *)g.files + g.first[i];
        uint64_t c;
        if (tkp_tab_capture_id(files[0], &c) || c != cid) continue;
        struct tkp_tab_out *outs[TKP_TAB_COUNT] = {[TKP_TAB_MOE] = out};
        struct tkp_tab_info info;
        found = 1;
        err = tkp_tab_capture(files, g.first[i + 1] - g.first[i], in->cl, id, outs, &info, why,
                              wl);
    }
    tkp_tab_groups_free(&g);
    if (!err && !found)
        say(in, 1, "capture %016llx: its files left %s before the moe pass: no moe rows",
            (unsigned long long)cid, dir);
    return err;
}

/* Cuts a batch of l at its current record: the rows of the steps closed since the last cut (all
 * that is left, and the per-capture tables, when final), sent as batch l->batch + 1. A batch
 * without rows is not one (nothing noted) unless final. */
static int cut(struct tkp_ingest *in, struct state *st, struct live *l, int final, char *why,
               size_t wl)
{
    struct membuf body[TKP_TAB_COUNT] = {0};
    struct tkp_tab_out *outs[TKP_TAB_COUNT] = {0};
    struct tkp_tab_ident id = *in->id;
    uint64_t k = l->batch + 1, rows = 0;
    unsigned mask = 1u << TKP_TAB_STEPS | 1u << TKP_TAB_STEP_CLASSES;
    int err;
    if (l->next_at != UINT64_MAX && (l->next_at != l->nrec || l->next_final != final))
        say(in, 1, "capture %016llx: batch %llu was cut at record %llu%s, now at %llu%s: the "
            "capture changed since",
            (unsigned long long)l->cid, (unsigned long long)k, (unsigned long long)l->next_at,
            l->next_final ? " (its end)" : "", (unsigned long long)l->nrec, final ? " (its end)" : "");
    if (final) mask = (1u << TKP_TAB_COUNT) - 1;
    id.batch = k;
    err = batch_outs(st, l->cid, k, mask, outs, body);
    if (!err) err = tkp_tab_tail_rows(l->t, &id, outs, final);
    if (!err && final && outs[TKP_TAB_MOE] && tkp_tab_tail_moe_hint(l->t))
        err = moe_rows(in, l->cid, &id, outs[TKP_TAB_MOE], why, wl);
    else if (err)
        err = tkp_why(why, wl, err, "%s", tkp_strerror(err));
    for (int t = 0; t < TKP_TAB_COUNT; t++)
        rows += outs[t] ? tkp_tab_rows(outs[t]) : 0;
    if (!err && (rows || final || find(st, l->cid, -1, k))) {
        if (!(err = send_batch(in, st, l->cid, k, l->nrec, outs, body, why, wl))) l->batch = k;
        if (!err && final) in->captures++;
    }
    outs_free(outs, body);
    l->last_at = l->nrec;
    l->cut_s = mono_s();
    next_recorded(st, l);
    return err;
}

static struct live *live_of(struct live **v, size_t *n, size_t *cap, uint64_t src)
{
    for (size_t i = 0; i < *n; i++)
        if ((*v)[i].src == src) return &(*v)[i];
    if (TKP_GROW(*v, *cap, *n + 1)) return NULL;
    struct live *l = &(*v)[(*n)++];
    *l = (struct live){.src = src, .next_at = UINT64_MAX, .cut_s = mono_s()};
    return l;
}

/* One record of a followed capture. */
static int live_record(struct tkp_ingest *in, struct state *st, struct tkp_follow *f,
                       struct live *l, const struct tkp_record *rec, char *why, size_t wl)
{
    int err = 0;
    if (l->skip) return 0;
    if (!l->t && tkp_tab_tail_new(in->cl, &l->t)) return tkp_why(why, wl, TKP_ERR_NOMEM, "out of memory");
    /* a batch the state file holds is cut again where it was (the same rows); a new one at a
     * chunk's start, so that a catching-up reader's batches stay bounded */
    if (l->has_cid && l->nrec == l->next_at && !l->next_final)
        err = cut(in, st, l, 0, why, wl);
    else if (l->has_cid && l->next_at == UINT64_MAX && rec->type == TKP_REC_CHUNK &&
             l->nrec - l->last_at >= TKP_INGEST_BATCH_RECORDS)
        err = cut(in, st, l, 0, why, wl);
    if (err) return err;
    if (tkp_tab_tail_add(l->t, rec)) return tkp_why(why, wl, TKP_ERR_NOMEM, "out of memory");
    l->nrec++;
    if (!l->has_cid && tkp_tab_tail_id(l->t, &l->cid)) {
        l->has_cid = 1;
        if (all_done(st, l->cid)) { /* stored whole already: its files are not read on */
            l->skip = 1;
            in->stored++;
            tkp_follow_skip(f, l->src);
            tkp_tab_tail_free(l->t);
            l->t = NULL;
        } else {
            next_recorded(st, l);
        }
    }
    return 0;
}

/* Follows the watched directory until killed (or, exit_when_idle, until every capture ended). */
static int follow(struct tkp_ingest *in, struct state *st, int inputs, char *why, size_t wl)
{
    struct tkp_follow_opts fo = {.until_exit = in->exit_when_idle,
                                 .no_snapshots = 1,
                                 .poll_ms = in->poll_s < 0.01 ? 10 : (unsigned)(in->poll_s * 1000)};
    struct tkp_follow *f;
    struct live *v = NULL;
    size_t n = 0, cap = 0;
    int err = tkp_follow_open(in->watch, &fo, &f, why, wl), said = -1, snaps = 0;
    double snap_s = 0;
    while (!err) {
        struct tkp_record rec;
        int k = tkp_follow_next(f, &rec, (int)fo.poll_ms);
        for (const char *w; (w = tkp_follow_warning(f));)
            say(in, 1, "%s", w);
        if (k < 0) {
            err = tkp_why(why, wl, k, "out of memory");
            break;
        }
        if (k == TKP_FOLLOW_RECORD) {
            struct live *l = live_of(&v, &n, &cap, tkp_follow_source(f));
            if (!l) err = tkp_why(why, wl, TKP_ERR_NOMEM, "out of memory");
            else err = live_record(in, st, f, l, &rec, why, wl);
            continue;
        }
        if (k == TKP_FOLLOW_EXITED) {
            struct live *l = live_of(&v, &n, &cap, tkp_follow_source(f));
            if (!l) {
                err = tkp_why(why, wl, TKP_ERR_NOMEM, "out of memory");
                break;
            }
            if (l->has_cid && !l->skip && l->nrec == l->next_at && !l->next_final)
                err = cut(in, st, l, 0, why, wl);
            if (!err && l->has_cid && !l->skip) err = cut(in, st, l, 1, why, wl);
            tkp_tab_tail_free(l->t);
            *l = v[--n];
            said = -1;
            continue;
        }
        /* idle: every whole chunk written so far was read */
        for (size_t i = 0; !err && i < n; i++) {
            struct live *l = &v[i];
            if (!l->has_cid || l->skip) continue;
            if (l->nrec == l->next_at && !l->next_final)
                err = cut(in, st, l, 0, why, wl);
            else if (l->next_at == UINT64_MAX && l->nrec > l->last_at &&
                     mono_s() - l->cut_s >= in->batch_s)
                err = cut(in, st, l, 0, why, wl);
        }
        if (!err && mono_s() - snap_s >= in->poll_s) {
            err = round_(in, st, in->watch, &snaps, 0, why, wl);
            if (!err && inputs) err = round_(in, st, NULL, &inputs, 0, why, wl);
            snap_s = mono_s();
        }
        if (err) break;
        int now = (int)n;
        if (now != said) /* once per change, not every poll */
            say(in, 0, "following %d capture%s in %s: waiting for new chunks%s", now,
                now == 1 ? "" : "s", in->watch,
                snaps || inputs ? " (and captures still being written to end)" : "");
        said = now;
        if (in->exit_when_idle && (k == TKP_FOLLOW_END || !tkp_follow_nprocs(f)) && !n && !snaps &&
            !inputs)
            break;
    }
    for (size_t i = 0; i < n; i++)
        tkp_tab_tail_free(v[i].t);
    free(v);
    tkp_follow_close(f);
    return err;
}

int tkp_ingest_run(struct tkp_ingest *in, char *why, size_t whylen)
{
    struct state st;
    int pending = 0, said = 0, err = state_open(&st, in->state, why, whylen);
    if (!err) err = round_(in, &st, NULL, &pending, 1, why, whylen);
    /* a capture given that is still being written is read whole once it ends (settled()):
     * waited for here, or while following */
    while (!err && pending && !in->watch) {
        if (pending != said)
            say(in, 0, "waiting for %d capture%s still being written to end (--watch DIR would "
                "ingest %s as %s grow%s)", pending, pending == 1 ? "" : "s",
                pending == 1 ? "it" : "them", pending == 1 ? "it" : "they",
                pending == 1 ? "s" : "");
        said = pending;
        nap_ms(in->poll_s < 0.01 ? 10 : (unsigned)(in->poll_s * 1000));
        err = round_(in, &st, NULL, &pending, 0, why, whylen);
    }
    if (!err && in->watch) err = follow(in, &st, pending, why, whylen);
    if (st.fd > 0) close(st.fd);
    free(st.e);
    return err;
}
