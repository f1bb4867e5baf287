/* tokprof decoder: streaming capture reader (see reader.h; format in docs/FORMAT.md).
 *
 * Each chunk is read whole, decompressed, then walked twice: a first pass decodes every record
 * without side effects, so a malformed record anywhere rejects the chunk before any of its
 * records reach the caller; the second pass applies NAME/THREAD definitions in payload order
 * and delivers. Decoding is cheap next to zstd, and the alternative (buffering decoded records)
 * would cost memory proportional to the chunk's record count. */
#include "capture/reader.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#define ZSTD_STATIC_LINKING_ONLY /* ZSTD_d_forceIgnoreChecksum, for the prescan */
#include <zstd.h>

#include "base/map.h"
#include "base/err.h"
#include "base/grow.h"
#include "capture/gputmpl.h"
#include "capture/record.h"
#include "capture/record_fast.h"
#include "capture/rep.h"
#include "capture/steplearn.h"

/* One name id. `chunk` is 1 + the ordinal of the last chunk that defined it: a chunk may only
 * use the names it defines itself (FORMAT.md: chunks are independent). */
struct name_slot {
    uint64_t id;
    uint64_t chunk;
    char *str;
};

struct thread_slot {
    uint32_t os_tid;
    uint64_t chunk; /* as for names */
};

struct tkp_reader {
    FILE *f;
    uint32_t flags;
    uint64_t off;    /* file offset of the next chunk header */
    uint64_t nchunk; /* ordinal of the current chunk */
    uint64_t next_seq; /* the next chunk's seq (stream files); its least (snapshots) */
    int state;       /* 0 reading, 1 clean end, <0 stopped (err.code) */
    struct tkp_reader_err err;
    struct tkp_reader_stats stats;

    ZSTD_DCtx *dctx;
    uint8_t *zbuf, *raw;
    size_t zcap, rawcap;
    int in_chunk; /* delivering from cur */
    uint64_t chunk_off;
    struct tkp_mp cur;
    uint64_t prev_ns; /* dt accumulator */

    struct name_slot *names; /* in order defined */
    size_t names_cap, names_used, names_bytes;
    struct tkp_map names_ix; /* names by id */
    char **retired; /* strings replaced by a redefinition: callers may hold them */
    size_t nretired, retired_cap;
    struct thread_slot *threads;
    uint32_t threads_cap;

    struct tkp_decode_buf buf;
    /* name_get's direct-mapped cache: the string an id resolved to, and in which chunk */
    struct {
        uint64_t id, chunk;
        const char *str;
    } ncache[256];
    char namebuf[TKP_NAME_MAX]; /* a NAME string when the table is full */
    uint64_t pid;               /* from META */
    uint64_t changes; /* NAME / THREAD records that changed a meaning in a chunk (runs, above) */
    /* run_uniform's last answer: the RUN of these kinds and tmpls columns (a repeating RUN has
     * its RUN's) has every template resolved and of one thread (ok), while changes + 1 is now and
     * no template was defined since (resolve_tmpl forgets it), in chunk ordinal chunk - 1 */
    struct {
        const uint8_t *kind, *tmpl;
        uint32_t n, thread, tid;
        int ok;
        uint64_t now, chunk;
    } uni;
    /* a reader over other readers (tkp_reader_new_over): everything else is unused */
    const struct tkp_reader_ops *ops;
    void *impl;
    struct tkp_steplearn *learn; /* the learned step definition (steplearn.h); NULL: none */
    int bare; /* the prescan's reader: RUNs and COLS (launches, GPU records) are skipped whole */
    /* The chunks the prescan decompressed, in file order from the first, handed to the reader
     * behind it, whose pass takes them instead of reading and decompressing them again. */
    struct ahead {
        uint8_t *raw;
        size_t cap;
        uint32_t rlen, seq;
        uint64_t off, end; /* the chunk's header offset; the next chunk's */
        int checked;       /* the prescan's pass 1 (validate) accepted it */
    } *ahead;
    size_t nahead, ahead_cap, ahead_i, ahead_bytes;
    int keep;      /* the prescan's reader: keeps each chunk it decompresses (up to AHEAD_MAX) */
    int raw_given; /* keep: raw is the last chunk kept, not this reader's to reuse or free */
    struct tkp_rep *rep; /* format v5's REP records (capture/rep.h); NULL in older captures */
    char *prescan_path; /* the prescan is still to run, on the first read (a reader opened only
                         * to check a file, or read for its META, never pays for it) */
};

/* What the prescan keeps for the reader behind it, decompressed: the format's largest chunk.
 * Past it the prescan goes on learning and the reader decompresses the rest itself. */
#define AHEAD_MAX TKP_CHUNK_MAX_RAW

static uint32_t le32(const uint8_t *p)
{
    return p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

int tkp_reader_open_stream(FILE *f, struct tkp_reader **rp, char *why, size_t whylen)
{
    uint8_t h[TKP_FILE_HEADER_LEN];
    *rp = NULL;
    size_t n = fread(h, 1, sizeof(h), f);
    int err = 0;
    if (ferror(f))
        err = tkp_why(why, whylen, TKP_ERR_IO, "read error: %s", strerror(errno));
    else if (n == 0)
        err = tkp_why(why, whylen, TKP_ERR_NOT_CAPTURE, "empty file, not a tokprof capture");
    else if (memcmp(h, TKP_FILE_MAGIC, n < TKP_FILE_MAGIC_LEN ? n : TKP_FILE_MAGIC_LEN))
        err = tkp_why(why, whylen, TKP_ERR_NOT_CAPTURE, "not a tokprof capture (bad magic)");
    else if (n < sizeof(h))
        err = tkp_why(why, whylen, TKP_ERR_HEADER, "capture header cut short (%zu of %d bytes)", n,
                      TKP_FILE_HEADER_LEN);
    if (err) {
        fclose(f);
        return err;
    }
    unsigned version = h[8] | h[9] << 8;
    uint32_t hlen = le32(h + 12);
    if (version < TKP_FORMAT_VERSION_MIN || version > TKP_FORMAT_VERSION)
        err = tkp_why(why, whylen, TKP_ERR_VERSION,
                      "capture format version %u, this tokprof reads versions %d to %d", version,
                      TKP_FORMAT_VERSION_MIN, TKP_FORMAT_VERSION);
    else if (hlen < TKP_FILE_HEADER_LEN || hlen > TKP_HEADER_MAX)
        err = tkp_why(why, whylen, TKP_ERR_HEADER, "bad header length %u", hlen);
    /* a longer header (a later minor addition) is skipped, as FORMAT.md says */
    for (uint32_t skip = hlen - TKP_FILE_HEADER_LEN; !err && skip; skip--)
        if (fgetc(f) == EOF) err = tkp_why(why, whylen, TKP_ERR_HEADER, "capture header cut short");
    struct tkp_reader *r = err ? NULL : calloc(1, sizeof(*r));
    if (!err && (!r || !(r->dctx = ZSTD_createDCtx()))) {
        free(r);
        err = tkp_why(why, whylen, TKP_ERR_NOMEM, "out of memory");
    }
    if (err) {
        fclose(f);
        return err;
    }
    r->f = f;
    r->flags = h[10] | h[11] << 8;
    r->off = hlen;
    r->learn = tkp_steplearn_new(); /* NULL: the steps as the shim wrote them */
    if (version >= 5 && !(r->rep = malloc(sizeof(*r->rep)))) {
        tkp_reader_close(r);
        return tkp_why(why, whylen, TKP_ERR_NOMEM, "out of memory");
    }
    if (r->rep) tkp_rep_chunk(r->rep);
    *rp = r;
    return 0;
}

/* The learner's prescan (steplearn.h): the capture's head, read by a reader of its own until the
 * learning window is full or the file ends (RUNs and COLS skipped whole). Each chunk it
 * decompresses is handed to r, whose pass takes it instead of decompressing it again (up to
 * AHEAD_MAX). Any failure leaves r learning in its own pass. */
static void prescan(const char *path, struct tkp_reader *r)
{
    FILE *f = fopen(path, "rb");
    struct tkp_reader *p;
    struct tkp_record rec;
    if (!f || tkp_reader_open_stream(f, &p, NULL, 0)) return;
    struct tkp_steplearn *l = p->learn;
    p->learn = NULL;
    p->bare = p->keep = 1;
    uint64_t start = p->off;
    while (l && !tkp_steplearn_done(l) && tkp_reader_next(p, &rec) == 1)
        if (rec.type == TKP_REC_COPY || rec.type == TKP_REC_STEP || rec.type == TKP_REC_META)
            tkp_steplearn_feed(l, &rec);
    if (p->raw_given) p->raw = NULL, p->rawcap = 0, p->raw_given = 0;
    struct stat ps, rs; /* the same file (not one renamed over it between the two opens) */
    if (!fstat(fileno(p->f), &ps) && !fstat(fileno(r->f), &rs) && ps.st_dev == rs.st_dev &&
        ps.st_ino == rs.st_ino && S_ISREG(rs.st_mode) && p->flags == r->flags && start == r->off) {
        r->ahead = p->ahead, r->nahead = p->nahead, r->ahead_cap = p->ahead_cap;
        p->ahead = NULL, p->nahead = p->ahead_cap = 0;
    }
    tkp_reader_close(p);
    if (!l) return;
    tkp_steplearn_rewind(l);
    tkp_steplearn_free(r->learn);
    r->learn = l;
}

int tkp_reader_open(const char *path, struct tkp_reader **r, char *why, size_t whylen)
{
    FILE *f = strcmp(path, "-") ? fopen(path, "rb") : fdopen(dup(0), "rb");
    *r = NULL;
    if (!f) return tkp_why(why, whylen, TKP_ERR_IO, "%s", strerror(errno));
    int err = tkp_reader_open_stream(f, r, why, whylen);
    if (!err && strcmp(path, "-"))
        (*r)->prescan_path = strdup(path); /* NULL: learned in the pass */
    return err;
}

struct tkp_reader *tkp_reader_new_over(const struct tkp_reader_ops *ops, void *impl)
{
    struct tkp_reader *r = calloc(1, sizeof(*r));
    if (r) r->ops = ops, r->impl = impl;
    return r;
}

void *tkp_reader_impl(const struct tkp_reader *r, const struct tkp_reader_ops *ops)
{
    return r->ops == ops ? r->impl : NULL;
}

void tkp_reader_release(struct tkp_reader *r)
{
    free(r->prescan_path);
    r->prescan_path = NULL;
    if (r->raw_given) r->raw = NULL, r->raw_given = 0; /* the last kept chunk's */
    for (size_t i = r->ahead_i; i < r->nahead; i++)
        free(r->ahead[i].raw);
    free(r->ahead);
    r->ahead = NULL;
    r->nahead = r->ahead_cap = r->ahead_i = 0;
    if (r->f) fclose(r->f);
    ZSTD_freeDCtx(r->dctx);
    free(r->zbuf);
    free(r->raw);
    tkp_decode_buf_free(&r->buf);
    r->f = NULL;
    r->dctx = NULL;
    r->zbuf = r->raw = NULL;
    r->zcap = r->rawcap = 0;
    r->in_chunk = 0;
    r->buf.run.i = r->buf.run.n = r->buf.run.fast_n = r->buf.run.left = 0; /* the fast path */
    if (!r->state) r->state = 1;
}

void tkp_reader_close(struct tkp_reader *r)
{
    if (!r) return;
    if (r->ops) {
        r->ops->free(r->impl);
        free(r);
        return;
    }
    tkp_reader_release(r);
    for (size_t i = 0; i < r->names_used; i++)
        free(r->names[i].str);
    free(r->names);
    tkp_map_free(&r->names_ix);
    for (size_t i = 0; i < r->nretired; i++)
        free(r->retired[i]);
    free(r->retired);
    free(r->threads);
    tkp_steplearn_free(r->learn);
    free(r->rep);
    free(r);
}

int tkp_reader_retry(struct tkp_reader *r)
{
    if (r->ops || !r->f || r->in_chunk) return r->state < 0 ? r->state : 0;
    if (r->state < 0 && r->state != TKP_ERR_TORN) return r->state;
    /* r->off only moves past a chunk once it is whole and valid: seek back to it */
    clearerr(r->f);
    if (fseeko(r->f, (off_t)r->off, SEEK_SET)) return r->state < 0 ? r->state : 0;
    r->state = 0;
    memset(&r->err, 0, sizeof(r->err));
    return 0;
}

const struct tkp_reader_err *tkp_reader_error(const struct tkp_reader *r)
{
    if (r->ops) return r->ops->error(r->impl);
    return r->state < 0 ? &r->err : NULL;
}

const struct tkp_reader_stats *tkp_reader_stats(const struct tkp_reader *r)
{
    return r->ops ? r->ops->stats(r->impl) : &r->stats;
}

int tkp_file_writer_active(const char *path)
{
    unsigned char h[TKP_FILE_HEADER_LEN];
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK), held = -1;
    if (fd < 0) return -1;
    if (read(fd, h, sizeof(h)) == (ssize_t)sizeof(h) &&
        !memcmp(h, TKP_FILE_MAGIC, TKP_FILE_MAGIC_LEN) && (h[10] & TKP_FILE_LOCKED)) {
        if (!flock(fd, LOCK_EX | LOCK_NB)) held = 0; /* ours for a moment: close lets it go */
        else if (errno == EWOULDBLOCK) held = 1;
    }
    close(fd);
    return held;
}

uint32_t tkp_reader_flags(const struct tkp_reader *r)
{
    return r->ops ? r->ops->flags(r->impl) : r->flags;
}

static int stop(struct tkp_reader *r, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->err.msg, sizeof(r->err.msg), fmt, ap);
    va_end(ap);
    r->err.code = code;
    r->err.offset = r->chunk_off;
    r->state = code;
    r->in_chunk = 0;
    r->buf.run.i = r->buf.run.n = r->buf.run.fast_n = r->buf.run.left = 0; /* the fast path */
    return code;
}

/* ---- names and threads ---- */

static int eq_name(const void *ctx, uint32_t id, const void *key)
{
    return ((const struct tkp_reader *)ctx)->names[id].id == *(const uint64_t *)key;
}

/* The entry of id, NULL when it was never defined. */
static struct name_slot *name_find(struct tkp_reader *r, uint64_t id)
{
    int64_t i = tkp_map_find(&r->names_ix, tkp_mix64(id), eq_name, r, &id);
    return i < 0 ? NULL : &r->names[i];
}

/* Defines id in the current chunk; returns the string to hand the caller (never NULL). Past
 * TKP_NAMES_MAX_BYTES, or out of memory, the name is not stored: later uses read "?". */
static const char *name_define(struct tkp_reader *r, uint64_t id, const char *s, uint32_t len)
{
    r->ncache[id & 255].chunk = 0; /* name_get looks it up afresh */
    size_t n = len < TKP_NAME_MAX - 1 ? len : TKP_NAME_MAX - 1;
    char *str = NULL;
    struct name_slot *slot = NULL;
    struct tkp_map_slot *ms;
    uint64_t h = tkp_mix64(id);
    if (tkp_map_reserve(&r->names_ix, r->names_used + 1)) goto unstored;
    ms = tkp_map_probe(&r->names_ix, h, eq_name, r, &id);
    slot = ms->id1 ? &r->names[ms->id1 - 1] : NULL;
    if (slot && strlen(slot->str) == n && !memcmp(slot->str, s, n) && !memchr(s, 0, n)) {
        slot->chunk = r->nchunk + 1; /* the usual case: the same string again */
        return slot->str;
    }
    if (r->names_bytes + n + 1 > TKP_NAMES_MAX_BYTES || !(str = malloc(n + 1))) goto unstored;
    for (size_t i = 0; i < n; i++)
        str[i] = s[i] ? s[i] : '?';
    str[n] = 0;
    if (slot) { /* redefined differently: earlier records may still point at the old one */
        r->changes += slot->chunk == r->nchunk + 1;
        if (TKP_GROW(r->retired, r->retired_cap, r->nretired + 1)) {
            free(str);
            goto unstored;
        }
        r->retired[r->nretired++] = slot->str;
    } else {
        if (TKP_GROW_FROM(r->names, r->names_cap, r->names_used + 1, 256)) {
            free(str);
            goto unstored;
        }
        slot = &r->names[r->names_used];
        tkp_map_put(&r->names_ix, ms, h, (uint32_t)r->names_used++);
    }
    r->names_bytes += n + 1;
    slot->id = id;
    slot->str = str;
    slot->chunk = r->nchunk + 1;
    return str;
unstored:
    for (size_t i = 0; i < n; i++)
        r->namebuf[i] = s[i] ? s[i] : '?';
    r->namebuf[n] = 0;
    return r->namebuf;
}

static const char *name_get(struct tkp_reader *r, uint64_t id)
{
    __typeof__(r->ncache[0]) *c = &r->ncache[id & 255];
    if (c->chunk == r->nchunk + 1 && c->id == id) return c->str;
    struct name_slot *s = name_find(r, id);
    if (s && s->chunk == r->nchunk + 1) {
        c->id = id;
        c->chunk = s->chunk;
        c->str = s->str;
        return s->str;
    }
    r->stats.missing_names++;
    return TKP_NAME_MISSING;
}

static void thread_define(struct tkp_reader *r, uint32_t t, uint32_t os_tid)
{
    if (t >= r->threads_cap) { /* t < TKP_THREADS_MAX, checked by the decoder */
        size_t cap = r->threads_cap;
        if (tkp_grow_zeroed((void **)&r->threads, &cap, (size_t)t + 1, sizeof(*r->threads)))
            return; /* uses will count as missing: degraded, not wrong */
        r->threads_cap = (uint32_t)cap;
    }
    r->changes += r->threads[t].chunk == r->nchunk + 1 && r->threads[t].os_tid != os_tid;
    r->threads[t].os_tid = os_tid;
    r->threads[t].chunk = r->nchunk + 1;
}

static uint32_t thread_get(struct tkp_reader *r, uint32_t t)
{
    if (t == TKP_THREAD_NONE) return 0;
    if (t < r->threads_cap && r->threads[t].chunk == r->nchunk + 1) return r->threads[t].os_tid;
    r->stats.missing_threads++;
    return 0;
}

/* ---- chunks ---- */

static int grow_buf(uint8_t **p, size_t *cap, size_t need)
{
    return tkp_grow_to((void **)p, cap, need, 1, 4096, 0);
}

/* Pass 1: every record must decode, the first must be CHUNK with the header's seq. */
static int validate(struct tkp_reader *r, size_t raw_len, uint32_t seq)
{
    struct tkp_mp c;
    struct tkp_record rec;
    char why[160];
    int first = 1;
    tkp_run_chunk(&r->buf.run);
    if (r->rep) tkp_rep_chunk(r->rep);
    tkp_mp_init(&c, r->raw, raw_len);
    while (tkp_mp_left(&c)) {
        size_t at = (size_t)(c.p - r->raw);
        const uint8_t *p = c.p;
        if (!first && r->rep && tkp_rep_is(&c)) { /* the records of a REP ("Repeats"), checked */
            int err = tkp_rep_expand(r->rep, &c, 0, why, sizeof(why));
            while (!err && tkp_rep_pending(r->rep)) {
                if (tkp_rep_check_next(r->rep) > 0) continue;
                tkp_rep_pack_next(r->rep);
                if (tkp_record_check_fast(&r->rep->cur, &r->buf) < 0)
                    err = tkp_record_decode(&r->rep->cur, &rec, &r->buf, why, sizeof(why)) < 0;
            }
            if (err) return stop(r, TKP_ERR_RECORD, "payload byte %zu: %s", at, why);
            continue;
        }
        int t = tkp_record_check_fast(&c, &r->buf), k = 1; /* t: a frequent type, never CHUNK */
        if (t >= 0)
            rec.type = (enum tkp_rec)t;
        else
            k = tkp_record_decode(&c, &rec, &r->buf, why, sizeof(why));
        if (k < 0) return stop(r, k, "payload byte %zu: %s", at, why);
        if (r->rep) tkp_rep_note(r->rep, p, c.p, 0);
        if (first && (k != 1 || rec.type != TKP_REC_CHUNK))
            return stop(r, TKP_ERR_RECORD, "first record is not CHUNK");
        if (first && rec.chunk.seq != seq)
            return stop(r, TKP_ERR_RECORD, "CHUNK record has seq %llu, chunk header %u",
                        (unsigned long long)rec.chunk.seq, seq);
        if (!first && k == 1 && rec.type == TKP_REC_CHUNK)
            return stop(r, TKP_ERR_RECORD, "payload byte %zu: a second CHUNK record", at);
        first = 0;
    }
    tkp_run_chunk(&r->buf.run); /* a RUN checked here is opened again when delivered */
    r->buf.cols.left = r->buf.cols.n = 0; /* and a COLS */
    if (first) return stop(r, TKP_ERR_RECORD, "empty payload");
    return 0;
}

static int begin_chunk(struct tkp_reader *r, uint32_t rlen, uint32_t seq, uint64_t end,
                       int checked);

/* The next chunk the prescan decompressed (load_chunk): r's buffer from now on; after the last,
 * the file is read on from the chunk after it. */
static int take_ahead(struct tkp_reader *r)
{
    struct ahead a = r->ahead[r->ahead_i++];
    free(r->raw);
    r->raw = a.raw, r->rawcap = a.cap;
    r->ahead[r->ahead_i - 1].raw = NULL;
    r->chunk_off = a.off;
    if (r->ahead_i == r->nahead) {
        free(r->ahead);
        r->ahead = NULL;
        r->nahead = r->ahead_cap = r->ahead_i = 0;
        if (fseeko(r->f, (off_t)a.end, SEEK_SET))
            return stop(r, TKP_ERR_IO, "seek error: %s", strerror(errno));
    }
    return begin_chunk(r, a.rlen, a.seq, a.end, a.checked);
}

/* keep: the chunk just decompressed goes to the reader behind the prescan, while the kept ones
 * follow each other from the first and stay under AHEAD_MAX. */
static void keep_chunk(struct tkp_reader *r, uint32_t rlen, uint32_t seq, uint64_t end)
{
    if (r->ahead_bytes + rlen > AHEAD_MAX ||
        (r->nahead && r->ahead[r->nahead - 1].end != r->chunk_off) ||
        TKP_GROW(r->ahead, r->ahead_cap, r->nahead + 1)) {
        r->keep = 0; /* the rest the reader decompresses itself */
        return;
    }
    r->ahead[r->nahead++] = (struct ahead){r->raw, r->rawcap, rlen, seq, r->chunk_off, end, 0};
    r->ahead_bytes += rlen;
    r->raw_given = 1;
}

/* Reads, checks and decompresses the chunk at r->off. Returns 1, 0 at a clean end of file, or
 * the negative code it stopped with. */
static int load_chunk(struct tkp_reader *r)
{
    uint8_t h[TKP_CHUNK_HEADER_LEN];
    static const uint8_t magic[4] = {'T', 'K', 'P', 'C'};
    if (!r->bare && r->ahead_i < r->nahead) return take_ahead(r); /* the prescan's chunks */
    if (r->raw_given) r->raw = NULL, r->rawcap = 0, r->raw_given = 0; /* a new one */
    r->chunk_off = r->off;
    size_t n = fread(h, 1, sizeof(h), r->f);
    if (ferror(r->f)) return stop(r, TKP_ERR_IO, "read error: %s", strerror(errno));
    if (n == 0) {
        r->state = 1;
        return 0;
    }
    /* a cut header is a torn tail only if what is there could be the start of one */
    if (memcmp(h, magic, n < 4 ? n : 4)) return stop(r, TKP_ERR_CHUNK, "bad chunk magic");
    if (n < sizeof(h)) return stop(r, TKP_ERR_TORN, "incomplete chunk");
    uint32_t clen = le32(h + 4), rlen = le32(h + 8), seq = le32(h + 12);
    if (clen > TKP_CHUNK_MAX_COMPRESSED)
        return stop(r, TKP_ERR_CHUNK, "compressed_len %u above the 64 MiB limit", clen);
    if (rlen > TKP_CHUNK_MAX_RAW)
        return stop(r, TKP_ERR_CHUNK, "raw_len %u above the 64 MiB limit", rlen);
    /* +1 per chunk; a flight-recorder snapshot keeps the recorder's numbers, which increase */
    if ((r->flags & TKP_FILE_SNAPSHOT) ? seq < r->next_seq : seq != r->next_seq)
        return stop(r, TKP_ERR_CHUNK, "seq %u, expected %s%llu", seq,
                    (r->flags & TKP_FILE_SNAPSHOT) ? "at least " : "",
                    (unsigned long long)r->next_seq);
    if (grow_buf(&r->zbuf, &r->zcap, clen ? clen : 1) ||
        grow_buf(&r->raw, &r->rawcap, (size_t)rlen + TKP_PAYLOAD_PAD))
        return stop(r, TKP_ERR_NOMEM, "out of memory for a %u-byte chunk", rlen);
    n = fread(r->zbuf, 1, clen, r->f);
    if (ferror(r->f)) return stop(r, TKP_ERR_IO, "read error: %s", strerror(errno));
    if (n < clen) return stop(r, TKP_ERR_TORN, "incomplete chunk");
    size_t fsize = ZSTD_findFrameCompressedSize(r->zbuf, clen);
    if (ZSTD_isError(fsize)) return stop(r, TKP_ERR_CHUNK, "zstd: %s", ZSTD_getErrorName(fsize));
    if (fsize != clen)
        return stop(r, TKP_ERR_CHUNK, "zstd frame of %zu bytes, compressed_len %u", fsize, clen);
    unsigned long long csize = ZSTD_getFrameContentSize(r->zbuf, clen);
    if (csize == ZSTD_CONTENTSIZE_ERROR || csize == ZSTD_CONTENTSIZE_UNKNOWN)
        return stop(r, TKP_ERR_CHUNK, "zstd frame without a content size");
    if (csize != rlen)
        return stop(r, TKP_ERR_CHUNK, "zstd content size %llu, raw_len %u", csize, rlen);
    size_t got = ZSTD_decompressDCtx(r->dctx, r->raw, rlen, r->zbuf, clen);
    if (ZSTD_isError(got)) return stop(r, TKP_ERR_CHUNK, "zstd: %s", ZSTD_getErrorName(got));
    if (got != rlen) return stop(r, TKP_ERR_CHUNK, "decompressed %zu bytes, raw_len %u", got, rlen);
    memset(r->raw + rlen, 0, TKP_PAYLOAD_PAD); /* runs' columns are read 8 bytes at a time */
    if (r->keep) keep_chunk(r, rlen, seq, r->off + sizeof(h) + clen);
    return begin_chunk(r, rlen, seq, r->off + sizeof(h) + clen, 0);
}

/* The decompressed chunk in r->raw checked (unless the prescan's pass 1 has: the same bytes,
 * the same result) and opened; end: the next chunk's offset. */
static int begin_chunk(struct tkp_reader *r, uint32_t rlen, uint32_t seq, uint64_t end,
                       int checked)
{
    r->buf.gen = (uint32_t)(r->nchunk % UINT32_MAX) + 1; /* templates: checked per chunk */
    int err = checked ? 0 : validate(r, rlen, seq);
    if (err) return err;
    if (r->raw_given) r->ahead[r->nahead - 1].checked = 1; /* keep: for the reader behind */
    r->next_seq = (uint64_t)seq + 1;
    r->off = end;
    tkp_mp_init(&r->cur, r->raw, rlen);
    tkp_run_chunk(&r->buf.run); /* pass 2: no RUN before the chunk's first */
    if (r->rep) tkp_rep_chunk(r->rep); /* nor a groupable record */
    r->in_chunk = 1;
    r->prev_ns = 0;
    return 1;
}

/* Pass 2: definitions take effect, times and names are resolved. */
static void apply(struct tkp_reader *r, struct tkp_record *rec)
{
    rec->offset = r->chunk_off;
    if (rec->type == TKP_REC_META) r->pid = rec->meta.pid;
    rec->pid = r->pid;
    if (tkp_record_has_time(rec->type)) {
        /* unsigned wrap-around makes a negative dt subtract */
        rec->host_ns = r->prev_ns + (uint64_t)r->buf.dt;
        r->prev_ns = rec->host_ns;
    }
    switch (rec->type) {
    case TKP_REC_CHUNK:
        r->prev_ns = rec->chunk.base_ns;
        return;
    case TKP_REC_NAME:
        rec->name.str = name_define(r, rec->name.id, r->buf.name_raw, r->buf.name_len);
        return;
    case TKP_REC_THREAD:
        thread_define(r, rec->thread, rec->tid);
        return;
    case TKP_REC_META:
        return;
    case TKP_REC_GRAPH:
        for (uint32_t i = 0; i < rec->graph.nnodes; i++)
            r->buf.nodes[i].name = name_get(r, r->buf.nodes[i].name_id);
        return;
    case TKP_REC_LAUNCH:
        rec->launch.name = name_get(r, rec->launch.name_id);
        break;
    case TKP_REC_NVTX:
        rec->nvtx.name = name_get(r, rec->nvtx.name_id);
        break;
    case TKP_REC_LIB_CALL:
        rec->lib_call.op = name_get(r, rec->lib_call.op_id);
        break;
    case TKP_REC_GPU_KERNEL:
    case TKP_REC_GPU_COPY:
        /* GPU records arrive chunks after their launch: the thread's last mapping (indices
         * are never reused in a capture), without counting a missing definition */
        rec->gpu.name = rec->type == TKP_REC_GPU_COPY
                            ? (rec->gpu.kind == TKP_COPY_MEMSET ? "memset" : "memcpy")
                            : name_get(r, rec->gpu.name_id);
        rec->tid = rec->thread < r->threads_cap ? r->threads[rec->thread].os_tid : 0;
        return;
    case TKP_REC_GPU_INFO:
    case TKP_REC_STACK:
    case TKP_REC_MODULE:
        return;
    default:
        break;
    }
    rec->tid = thread_get(r, rec->thread);
}

/* ---- runs (FORMAT.md "Runs") ----
 * A run's records are the LAUNCH_T and LIB_CALL_T it stands for. Their templates keep the name
 * and tid they resolved to when they were defined (the same in the whole chunk unless a NAME or
 * THREAD record changes a meaning: r->changes counts those), so a run's record is its template
 * plus the columns' values. */

/* The name or tid a template's fields resolve to now, without counting a miss (a template
 * that misses resolves at each use, which counts it as the other records do). */
static const char *name_peek(struct tkp_reader *r, uint64_t id)
{
    struct name_slot *s = name_find(r, id);
    return s && s->chunk == r->nchunk + 1 ? s->str : NULL;
}

static void resolve_tmpl(struct tkp_reader *r, enum tkp_rec type)
{
    if (type != TKP_REC_TMPL && type != TKP_REC_LIB_TMPL) return; /* GPU_TMPL: names per record */
    r->uni.kind = NULL; /* a template (re)defined: run_uniform tells the next RUN afresh */
    struct tkp_decode_buf *b = &r->buf;
    uint32_t id = b->tmpl_id, th;
    const char *name;
    uint64_t *resolved;
    uint32_t *tid;
    if (type == TKP_REC_TMPL) {
        struct tkp_launch_tmpl *t = &b->ltmpl[id];
        name = t->launch.name = name_peek(r, t->launch.name_id);
        th = t->thread, resolved = &t->resolved, tid = &t->tid;
    } else {
        struct tkp_lib_tmpl *t = &b->ctmpl[id];
        name = t->lib.op = name_peek(r, t->lib.op_id);
        th = t->thread, resolved = &t->resolved, tid = &t->tid;
    }
    int mapped = th < r->threads_cap && r->threads[th].chunk == r->nchunk + 1;
    *tid = mapped ? r->threads[th].os_tid : 0;
    *resolved = name && mapped ? r->changes + 1 : 0;
}

/* What a RUN's next record (u->i) has besides its template's fields; u->i moves past it. */
static inline __attribute__((always_inline)) void run_head(struct tkp_reader *r,
                                                           struct tkp_record *rec,
                                                           enum tkp_rec type, uint32_t thread,
                                                           uint32_t tid)
{
    struct tkp_run *u = &r->buf.run;
    rec->type = type;
    rec->offset = r->chunk_off;
    rec->pid = r->pid;
    rec->step = u->step;
    rec->host_ns = r->prev_ns = u->bns[u->i++];
    rec->thread = thread;
    rec->tid = tid;
}

static int run_uniform(struct tkp_reader *r);

/* The open RUN's next batch decoded; tkp_reader_next() delivers it without a check per record
 * when all of the RUN's templates are resolved (fast_n). */
static void run_batch(struct tkp_reader *r)
{
    struct tkp_run *u = &r->buf.run;
    tkp_record_run_batch(&r->buf, r->prev_ns);
    u->fast_n = run_uniform(r) ? u->n : 0;
}

static inline __attribute__((always_inline)) void run_next(struct tkp_reader *r, struct tkp_record *rec)
{
    struct tkp_decode_buf *b = &r->buf;
    struct tkp_run *u = &b->run;
    if (u->i == u->n) run_batch(r);
    uint32_t i = u->i, id = u->btmpl[i];
    uint64_t now = r->changes + 1; /* a template resolved since no NAME/THREAD changed a meaning */
    if (!u->bkind[i]) {
        const struct tkp_launch_tmpl *t = &b->ltmpl[id];
        run_head(r, rec, TKP_REC_LAUNCH, t->thread, t->tid);
        rec->launch = t->launch;
        rec->launch.call = u->bcall[i];
        if (t->resolved == now) return;
        rec->launch.name = name_get(r, rec->launch.name_id);
    } else {
        const struct tkp_lib_tmpl *t = &b->ctmpl[id];
        run_head(r, rec, TKP_REC_LIB_CALL, t->thread, t->tid);
        rec->lib_call = t->lib;
        rec->lib_call.call = u->bcall[i];
        rec->lib_call.call_ns = u->bhost[i];
        if (t->resolved == now) return;
        rec->lib_call.op = name_get(r, rec->lib_call.op_id);
    }
    rec->tid = thread_get(r, rec->thread);
}

/* The batch of the open RUN for a peek: decoded when the last is delivered (as run_next() does
 * first). 0 when the next record is not a RUN's, or r is a reader over others. */
static int peek_batch(struct tkp_reader *r)
{
    struct tkp_run *u = &r->buf.run;
    if (u->i < u->n) return 1; /* only while a plain reader delivers a chunk (tkp_reader_next) */
    if (r->ops || r->state || !r->in_chunk || !u->left) return 0;
    run_batch(r);
    return 1;
}

size_t tkp_reader_peek_launches(struct tkp_reader *r, struct tkp_launch_bulk *b)
{
    struct tkp_decode_buf *d = &r->buf;
    struct tkp_run *u = &d->run;
    if (!peek_batch(r) || u->bkind[u->i]) return 0; /* or a library call next */
    uint64_t now = r->changes + 1; /* resolved: as run_next() tells it */
    uint32_t i = u->i, end = u->n - u->i > TKP_LAUNCH_BULK ? u->i + TKP_LAUNCH_BULK : u->n;
    size_t k = 0;
    b->step = u->step;
    for (; i < end && !u->bkind[i]; i++, k++) {
        const struct tkp_launch_tmpl *t = &d->ltmpl[u->btmpl[i]];
        if (t->resolved != now || (k && t->thread != b->thread)) break;
        b->thread = t->thread;
        b->host_ns[k] = u->bns[i];
        b->name_id[k] = t->launch.name_id;
    }
    return k;
}

/* Both peeks' take: the batch's next k records consumed, the last at host time last_ns. */
static void take(struct tkp_reader *r, size_t k, uint64_t last_ns)
{
    r->buf.run.i += (uint32_t)k;
    r->prev_ns = last_ns;
    r->stats.records += k;
}

void tkp_reader_take(struct tkp_reader *r, const struct tkp_launch_bulk *b, size_t k)
{
    take(r, k, b->host_ns[k - 1]);
}

_Static_assert(TKP_RUN_BATCH <= TKP_LAUNCH_BULK, "a peek holds a whole batch");

/* Whether every record of the open RUN has its template resolved (as run_next() tells it) and of
 * one thread, the first record's: told once for the RUN's columns, whose answer a repeating RUN
 * (the columns of the RUN before it) takes while no NAME/THREAD record changed a meaning and no
 * template was defined (r->uni). */
static int run_uniform(struct tkp_reader *r)
{
    struct tkp_decode_buf *d = &r->buf;
    struct tkp_run *u = &d->run;
    uint64_t now = r->changes + 1;
    if (r->uni.kind == u->pkind && r->uni.tmpl == u->ptmpl && r->uni.n == u->pn &&
        r->uni.now == now && r->uni.chunk == r->nchunk + 1)
        return r->uni.ok;
    const uint8_t *kind = u->pkind, *tm = u->ptmpl;
    uint32_t n = u->pn, thread = 0, tid = 0;
    int small = u->ptmpl_len == n, ok = 1; /* every id one byte; else varints, checked whole */
    for (uint32_t i = 0; i < n && ok; i++) {
        uint32_t id = (uint32_t)(small ? tm[i] : tkp_uvar_ok(&tm)), th, ti;
        uint64_t res;
        if (!kind[i]) {
            const struct tkp_launch_tmpl *t = &d->ltmpl[id];
            res = t->resolved, th = t->thread, ti = t->tid;
        } else {
            const struct tkp_lib_tmpl *t = &d->ctmpl[id];
            res = t->resolved, th = t->thread, ti = t->tid;
        }
        if (!i) thread = th, tid = ti;
        ok = res == now && th == thread;
    }
    r->uni.kind = u->pkind, r->uni.tmpl = u->ptmpl, r->uni.n = n;
    r->uni.now = now, r->uni.chunk = r->nchunk + 1;
    r->uni.thread = thread, r->uni.tid = tid, r->uni.ok = ok;
    return ok;
}

size_t tkp_reader_peek_full(struct tkp_reader *r, struct tkp_run_full *b)
{
    struct tkp_decode_buf *d = &r->buf;
    struct tkp_run *u = &d->run;
    if (!peek_batch(r)) return 0;
    uint32_t i = u->i, thread;
    size_t k = 0, n = u->n - i;
    /* the columns in place: the batch's, from the next record */
    const uint8_t *kind = b->kind = u->bkind + i;
    const uint32_t *tm = b->tmpl = u->btmpl + i;
    const struct tkp_launch_tmpl *lt = b->lt = d->ltmpl;
    const struct tkp_lib_tmpl *ct = b->ct = d->ctmpl;
    b->host_ns = u->bns + i, b->call = u->bcall + i, b->call_ns = u->bhost + i;
    b->step = u->step, b->pid = r->pid, b->offset = r->chunk_off;
    if (u->fast_n) { /* the usual RUN (run_uniform, when the batch was decoded): the batch */
        b->thread = r->uni.thread, b->tid = r->uni.tid;
        return n;
    }
    uint64_t now = r->changes + 1; /* resolved: as run_next() tells it */
    if (!kind[0])
        thread = b->thread = lt[tm[0]].thread, b->tid = lt[tm[0]].tid;
    else
        thread = b->thread = ct[tm[0]].thread, b->tid = ct[tm[0]].tid;
    for (; k < n; k++) {
        if (!kind[k]) {
            const struct tkp_launch_tmpl *t = &lt[tm[k]];
            if (t->resolved != now || t->thread != thread) break;
        } else {
            const struct tkp_lib_tmpl *t = &ct[tm[k]];
            if (t->resolved != now || t->thread != thread) break;
        }
    }
    return k;
}

void tkp_reader_take_full(struct tkp_reader *r, const struct tkp_run_full *b, size_t k)
{
    take(r, k, b->host_ns[k - 1]);
}

/* ---- columns (FORMAT.md "Columns", "GPU templates") ----
 * A COLS's or GPU_RUN's records are GPU_KERNEL or GPU_COPY records, whose names and tids resolve as apply()
 * resolves them. */
static void cols_next(struct tkp_reader *r, struct tkp_record *rec)
{
    struct tkp_decode_buf *b = &r->buf;
    struct tkp_cols *u = &b->cols;
    if (u->i == u->n) tkp_cols_batch(b); /* a COLS or a GPU_RUN */
    tkp_gpu_store(rec, u->type, u->bv[u->i++]);
    rec->offset = r->chunk_off;
    rec->pid = r->pid;
    rec->host_ns = 0;
    rec->gpu.name = u->type == TKP_REC_GPU_COPY
                        ? (rec->gpu.kind == TKP_COPY_MEMSET ? "memset" : "memcpy")
                        : name_get(r, rec->gpu.name_id);
    rec->tid = rec->thread < r->threads_cap ? r->threads[rec->thread].os_tid : 0;
}

static int next_slow(struct tkp_reader *r, struct tkp_record *rec);
static void deliver(struct tkp_reader *r, struct tkp_record *rec);

/* ---- repeats (FORMAT.md "Repeats", capture/rep.h) ----
 * A REP's records are decoded from the bytes it expands to, then go where the payload's do. The
 * payload's groupable records join the history a REP refers to. 1: rec delivered, 0: go on with
 * the payload (a REP just expanded is delivered from the next call), <0: stopped. */
static int next_rep(struct tkp_reader *r, struct tkp_record *rec)
{
    char why[160];
    struct tkp_rep *u = r->rep;
    if (!tkp_rep_pending(u)) {
        if (!tkp_mp_left(&r->cur) || !tkp_rep_is(&r->cur)) return 0;
        if (tkp_rep_expand(u, &r->cur, r->prev_ns, why, sizeof(why))) /* pass 1 accepted it */
            return stop(r, TKP_ERR_RECORD, "%s", why);
    }
    if (!tkp_rep_store_next(u, rec, &r->buf)) { /* LAUNCH_T, LIB_CALL_T: by their templates */
        tkp_rep_pack_next(u);
        int k = tkp_record_decode_fast(&u->cur, rec, &r->buf);
        if (!k) k = tkp_record_decode(&u->cur, rec, &r->buf, why, sizeof(why));
        if (k != 1) /* pass 1 decoded these very bytes */
            return stop(r, k < 0 ? k : TKP_ERR_RECORD, "a REP's record: %s", k < 0 ? why : "?");
    }
    deliver(r, rec);
    return 1;
}

/* The records of a RUN's decoded batch whose templates are all resolved first (fast_n): a leaf
 * that calls nothing, so that it saves no registers (u->i < u->fast_n only while a plain reader
 * delivers a chunk: stop() and tkp_reader_release() empty the batch, a reader over others never
 * has one). The rest, batches decoded and a batch with a template to resolve per record
 * included, takes the frame of everything else (next_slow). */
int tkp_reader_next(struct tkp_reader *r, struct tkp_record *rec)
{
    struct tkp_run *u = &r->buf.run;
    uint32_t i = u->i;
    if (__builtin_expect(i < u->fast_n, 1)) { /* every template resolved: no check */
        uint32_t id = u->btmpl[i];
        if (__builtin_expect(!u->bkind[i], 1)) {
            const struct tkp_launch_tmpl *t = &r->buf.ltmpl[id];
            run_head(r, rec, TKP_REC_LAUNCH, t->thread, t->tid);
            rec->launch = t->launch;
            rec->launch.call = u->bcall[i];
        } else {
            const struct tkp_lib_tmpl *t = &r->buf.ctmpl[id];
            run_head(r, rec, TKP_REC_LIB_CALL, t->thread, t->tid);
            rec->lib_call = t->lib;
            rec->lib_call.call = u->bcall[i];
            rec->lib_call.call_ns = u->bhost[i];
        }
        r->stats.records++;
        return 1;
    }
    return next_slow(r, rec);
}

__attribute__((noinline)) static int next_slow(struct tkp_reader *r, struct tkp_record *rec)
{
    char why[160];
    if (r->ops) return r->ops->next(r->impl, rec);
    if (r->prescan_path) {
        char *path = r->prescan_path;
        r->prescan_path = NULL;
        prescan(path, r);
        free(path);
    }
    for (;;) {
        if (r->state) return r->state < 0 ? r->state : 0;
        if (!r->in_chunk) {
            load_chunk(r);
            continue;
        }
        if (tkp_run_open(&r->buf.run)) { /* the records of a RUN (FORMAT.md "Runs") */
            run_next(r, rec);
            r->stats.records++;
            return 1;
        }
        if (tkp_cols_open(&r->buf.cols)) { /* and of a COLS (FORMAT.md "Columns") */
            cols_next(r, rec);
            r->stats.records++;
            return 1;
        }
        if (r->rep) { /* format v5: the records of a REP, and what a REP refers to */
            int k = next_rep(r, rec);
            if (k) return k;
        }
        if (!tkp_mp_left(&r->cur)) {
            r->in_chunk = 0;
            r->nchunk++;
            r->stats.chunks++;
            continue;
        }
        const uint8_t *at = r->cur.p;
        int k = tkp_record_decode_fast(&r->cur, rec, &r->buf);
        if (!k) k = tkp_record_decode(&r->cur, rec, &r->buf, why, sizeof(why));
        if (k < 0) /* pass 1 accepted this payload: only memory can fail here */
            return stop(r, k, "%s", why);
        if (k == 0) {
            r->stats.unknown_records++;
            continue;
        }
        if (k == TKP_DECODE_DEFINED) { /* a template: stored, nothing to deliver */
            resolve_tmpl(r, rec->type);
            continue;
        }
        if (k == TKP_DECODE_RUN || k == TKP_DECODE_COLS) { /* delivered above */
            if (r->bare) r->buf.run.left = r->buf.run.n = r->buf.cols.left = r->buf.cols.n = 0;
            /* (fast_n: 0 from the RUN's opening) */
            continue;
        }
        deliver(r, rec);
        if (r->rep) tkp_rep_note(r->rep, at, r->cur.p, r->prev_ns);
        return 1;
    }
}

static void deliver(struct tkp_reader *r, struct tkp_record *rec)
{
    apply(r, rec);
    if (r->learn && ((rec->type == TKP_REC_COPY && rec->copy.dir == TKP_DIR_DTOH) ||
                     rec->type == TKP_REC_STEP || rec->type == TKP_REC_META))
        tkp_steplearn_feed(r->learn, rec);
    r->stats.records++;
}
