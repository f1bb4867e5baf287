/* tokprof decoder: continuous ingest into ClickHouse (see ingest.h). */
#include "fleet/ingest.h"
#include "fleet/table_rows.h"

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

struct entry {
    uint64_t cid, rows;
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

static struct entry *find(struct state *s, uint64_t cid, int table)
{
    for (size_t i = s->n; i-- > 0;)
        if (s->e[i].cid == cid && s->e[i].table == table) return &s->e[i];
    return NULL;
}

static int note(struct state *s, uint64_t cid, int table, uint64_t rows, int done)
{
    struct entry *e = find(s, cid, table);
    if (!e) {
        if (TKP_GROW(s->e, s->cap, s->n + 1)) return TKP_ERR_NOMEM;
        e = &s->e[s->n++];
    }
    *e = (struct entry){cid, rows, table, done};
    return 0;
}

static int state_open(struct state *s, const char *path, char *why, size_t wl)
{
    memset(s, 0, sizeof(*s));
    FILE *f = fopen(path, "r");
    char line[256], word[8], tab[32];
    unsigned long long cid, rows;
    for (unsigned ln = 1; f && fgets(line, sizeof(line), f); ln++) {
        int t;
        /* a line cut by a kill mid-write has no newline: it never happened */
        if (!strchr(line, '\n')) break;
        if (sscanf(line, "%7s %llx %31s %llu", word, &cid, tab, &rows) != 4 ||
            (t = tkp_tab_find(tab)) < 0 || (strcmp(word, "begin") && strcmp(word, "done"))) {
            fclose(f);
            return tkp_why(why, wl, TKP_ERR_USAGE, "%s:%u: not a tokprof ingest state line", path,
                           ln);
        }
        if (note(s, cid, t, rows, word[0] == 'd')) {
            fclose(f);
            return tkp_why(why, wl, TKP_ERR_NOMEM, "out of memory");
        }
    }
    if (f) fclose(f);
    s->fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (s->fd < 0) return tkp_why(why, wl, TKP_ERR_IO, "%s: %s", path, strerror(errno));
    /* a torn last line (no newline) is ended so the next one starts clean */
    struct stat st;
    if (!fstat(s->fd, &st) && st.st_size > 0) {
        char c = '\n';
        int r = open(path, O_RDONLY | O_CLOEXEC);
        if (r >= 0 && pread(r, &c, 1, st.st_size - 1) == 1 && c != '\n' &&
            write(s->fd, "\n", 1) != 1)
            c = '\n';
        if (r >= 0) close(r);
    }
    return 0;
}

static int record(struct state *s, uint64_t cid, int table, uint64_t rows, int done, char *why,
                  size_t wl)
{
    char line[128];
    int n = snprintf(line, sizeof(line), "%s %016llx %s %llu\n", done ? "done" : "begin",
                     (unsigned long long)cid, tkp_tab_name(table), (unsigned long long)rows);
    if (write(s->fd, line, (size_t)n) != n || fsync(s->fd))
        return tkp_why(why, wl, TKP_ERR_IO, "state file: %s", strerror(errno));
    return note(s, cid, table, rows, done) ? tkp_why(why, wl, TKP_ERR_NOMEM, "out of memory") : 0;
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
static int server_rows(struct tkp_ingest *in, uint64_t cid, int table, uint64_t *rows, char *why,
                       size_t wl)
{
    char sql[256], q[768], wait[256];
    unsigned ms = 500;
    snprintf(sql, sizeof(sql),
             "SELECT count() FROM %s.%s WHERE capture_id = %llu AND ingest_batch = 1", in->db,
             tkp_tab_name(table), (unsigned long long)cid);
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

static int insert(struct tkp_ingest *in, struct state *st, uint64_t cid, int table, uint64_t rows,
                  const struct membuf *body, int pending, char *why, size_t wl)
{
    int ncols, err;
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
            if ((err = server_rows(in, cid, table, &have, why, wl))) break;
            if (have == rows) break;
            if (have) {
                err = tkp_why(why, wl, TKP_ERR_IO,
                              "capture %016llx: the server has %llu %s rows of batch 1, expected 0 "
                              "or %llu: not sending (remove them, or the state file's line)",
                              (unsigned long long)cid, (unsigned long long)have,
                              tkp_tab_name(table), (unsigned long long)rows);
                break;
            }
        }
        if (!pending && (err = record(st, cid, table, rows, 0, why, wl))) break;
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
    return err ? err : record(st, cid, table, rows, 1, why, wl);
}

/* ---- captures ---- */

/* 1 when no file of the capture changed for settle_s seconds. */
static int settled(const struct tkp_ingest *in, const char *const *files, size_t n)
{
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    for (size_t i = 0; i < n; i++) {
        struct stat st;
        if (stat(files[i], &st)) return 0;
        double age = (double)(now.tv_sec - st.st_mtim.tv_sec) +
                     (double)(now.tv_nsec - st.st_mtim.tv_nsec) / 1e9;
        if (age < in->settle_s) return 0;
    }
    return 1;
}

static int all_done(struct state *st, uint64_t cid)
{
    for (int t = 0; t < TKP_TAB_COUNT; t++) {
        struct entry *e = find(st, cid, t);
        if (!e || !e->done) return 0;
    }
    return 1;
}

/* One capture: its tables not yet done. ++*pending when it is not ready yet. */
static int capture(struct tkp_ingest *in, struct state *st, const char *const *files, size_t n,
                   int *pending, char *why, size_t wl)
{
    uint64_t cid;
    if (tkp_tab_capture_id(files[0], &cid)) return 0; /* listed as a capture a moment ago */
    if (all_done(st, cid)) return 0;
    if (!settled(in, files, n)) {
        ++*pending;
        return 0;
    }
    struct membuf body[TKP_TAB_COUNT] = {0};
    struct tkp_tab_out *outs[TKP_TAB_COUNT] = {0};
    struct tkp_tab_ident id = *in->id;
    struct tkp_tab_info info;
    int err = 0, ncols;
    id.batch = 1;
    for (int t = 0; !err && t < TKP_TAB_COUNT; t++) {
        const struct tkp_tab_col *cols = tkp_tab_cols(t, &ncols);
        struct entry *e = find(st, cid, t);
        if (!(e && e->done))
            err = tkp_tab_out_new(cols, ncols, TKP_FMT_TSV, TKP_Z_GZIP, 0, sink_mem, &body[t],
                                  &outs[t]);
    }
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
    for (int t = 0; !err && t < TKP_TAB_COUNT; t++) {
        if (!outs[t]) continue;
        if ((err = tkp_tab_out_finish(outs[t]))) {
            err = tkp_why(why, wl, err, "out of memory");
            break;
        }
        struct entry *e = find(st, cid, t);
        if (!info.rows[t])
            err = record(st, cid, t, 0, 1, why, wl);
        else
            err = insert(in, st, cid, t, info.rows[t], &body[t], e != NULL, why, wl);
        if (!err) in->rows += info.rows[t];
    }
    if (!err) in->captures++;
out:
    for (int t = 0; t < TKP_TAB_COUNT; t++)
        tkp_tab_out_free(outs[t]), free(body[t].p);
    return err;
}

static int round_(struct tkp_ingest *in, struct state *st, int *pending, int last, char *why,
                  size_t wl)
{
    const char *inputs[TKP_INGEST_INPUTS_MAX + 1];
    size_t n = 0;
    struct tkp_tab_groups g;
    for (size_t i = 0; i < in->ninputs && n < TKP_INGEST_INPUTS_MAX; i++)
        inputs[n++] = in->inputs[i];
    if (in->watch) inputs[n++] = in->watch;
    int err = tkp_tab_groups(inputs, n, &g, why, wl);
    if (err) return err;
    *pending = 0;
    for (size_t i = 0; !err && i < g.ngroups; i++)
        err = capture(in, st, (const char *const *)g.files + g.first[i],
                      g.first[i + 1] - g.first[i], pending, why, wl);
    /* unreadable inputs: once, at the end (while watching, a file being created is one) */
    for (char *line = g.bad, *nl; !err && last && line && *line; line = nl + 1) {
        nl = strchr(line, '\n');
        *nl = '\0';
        say(in, 1, "%s: skipped", line);
        in->skipped++;
    }
    tkp_tab_groups_free(&g);
    return err;
}

int tkp_ingest_run(struct tkp_ingest *in, char *why, size_t whylen)
{
    struct state st;
    int err = state_open(&st, in->state, why, whylen), pending = 0, said = 0;
    while (!err) {
        err = round_(in, &st, &pending, !in->watch, why, whylen);
        if (err || !in->watch) break;
        if (pending != said && pending) /* once per change, not every poll */
            say(in, 0, "waiting for %d capture%s in %s to be unchanged for %.1f s", pending,
                pending > 1 ? "s" : "", in->watch, in->settle_s);
        said = pending;
        if (!pending && in->exit_when_idle) {
            err = round_(in, &st, &pending, 1, why, whylen);
            break;
        }
        nap_ms((unsigned)(in->poll_s * 1000));
    }
    if (st.fd >= 0 && st.fd) close(st.fd);
    free(st.e);
    return err;
}
