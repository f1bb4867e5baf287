/* The follow reader (decoder/follow.h) on captures written piece by piece: whole chunks only, a
 * partly written chunk waited on and read once complete, the move to a rotated file, names that
 * outlive a rotation, the end once the writer is gone, a torn tail of a dead writer, the polling
 * fallback. The "writer" is a child process that only waits: its pid is the captures' META pid. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include "capwriter.h"
#include "base/err.h"
#include "capture/follow.h"

static const uint32_t one[3] = {1, 1, 1};
static char dir[64];
static pid_t writer, writer_pid;
static uint64_t expect_pid; /* the META pid launches() expects: 0, the writer's */

static void setup(void)
{
    strcpy(dir, "/tmp/tkp_follow_XXXXXX");
    cr_assert(mkdtemp(dir));
    writer_pid = writer = fork();
    cr_assert_geq(writer, 0);
    if (!writer) {
        pause(); /* the writer's process: alive until the test kills it */
        _exit(0);
    }
}

static void end_writer(void)
{
    if (writer > 0) {
        kill(writer, SIGKILL);
        waitpid(writer, NULL, 0);
        writer = 0;
    }
}

static void teardown(void)
{
    char cmd[128];
    end_writer();
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    cr_assert_eq(system(cmd), 0);
}

static void pstr(msgpack_packer *pk, const char *s)
{
    msgpack_pack_str(pk, strlen(s));
    msgpack_pack_str_body(pk, s, strlen(s));
}

/* META with this host's name (capw_meta's is a test host's, whose writers cannot be checked) */
static void meta_here(struct capw *w, uint64_t pid)
{
    char host[256] = "";
    gethostname(host, sizeof(host) - 1);
    msgpack_packer *pk = capw_pk(w);
    msgpack_pack_array(pk, 2);
    msgpack_pack_uint64(pk, TKP_REC_META);
    msgpack_pack_map(pk, 3);
    pstr(pk, "program");
    pstr(pk, "prog");
    pstr(pk, "pid");
    msgpack_pack_uint64(pk, pid);
    pstr(pk, "hostname");
    pstr(pk, host);
}

/* A capture of `chunks` chunks, each: META (pid), THREAD, NAME 3 = kernel, `per` launches. */
static struct capw *capture_of(uint64_t pid, int chunks, int per, const char *kernel)
{
    struct capw *w = capw_new();
    for (int c = 0; c < chunks; c++) {
        capw_chunk_begin(w, 1000000 * (uint64_t)(c + 1));
        meta_here(w, pid);
        capw_thread(w, 0, 77);
        capw_name(w, 3, kernel);
        for (int i = 0; i < per; i++)
            capw_launch(w, 10, 0, (uint64_t)c, 3, 0, 1, one, one, 0);
        capw_chunk_end(w);
    }
    return w;
}

/* ... of the writer's pid. */
static struct capw *capture(int chunks, int per, const char *kernel)
{
    return capture_of((uint64_t)writer_pid, chunks, per, kernel);
}

static void put(const char *path, const uint8_t *p, size_t n, const char *mode)
{
    FILE *f = fopen(path, mode);
    cr_assert(f);
    cr_assert_eq(fwrite(p, 1, n, f), n);
    fclose(f);
}

/* Launches delivered until the reader has nothing more within timeout_ms; *status gets the
 * last status (IDLE, EXITED or END). */
static int launches(struct tkp_follow *f, int timeout_ms, int *status, const char **name)
{
    struct tkp_record rec;
    int n = 0, k;
    while ((k = tkp_follow_next(f, &rec, timeout_ms)) == TKP_FOLLOW_RECORD) {
        if (rec.type != TKP_REC_LAUNCH) continue;
        cr_assert_eq(rec.pid, expect_pid ? expect_pid : (uint64_t)writer_pid);
        if (name) *name = rec.launch.name;
        n++;
    }
    *status = k;
    return n;
}

static void partial_chunk(int no_inotify)
{
    char path[128];
    snprintf(path, sizeof(path), "%s/prog.%d.tokprof", dir, (int)writer);
    struct capw *w = capture(2, 5, "k");
    size_t len;
    const uint8_t *d = capw_data(w, &len);
    size_t cut = len - 9; /* the second chunk's last 9 bytes are not written yet */
    put(path, d, cut, "wb");
    struct tkp_follow *f;
    struct tkp_follow_opts o = {.until_exit = 1, .poll_ms = 20, .no_inotify = no_inotify};
    char why[256];
    cr_assert_eq(tkp_follow_open(path, &o, &f, why, sizeof(why)), 0, "%s", why);
    int st;
    cr_assert_eq(launches(f, 100, &st, NULL), 5, "only the first, whole chunk");
    cr_assert_eq(st, TKP_FOLLOW_IDLE);
    put(path, d + cut, len - cut, "ab");
    cr_assert_eq(launches(f, 5000, &st, NULL), 5, "the second chunk once it is whole");
    cr_assert_eq(st, TKP_FOLLOW_IDLE, "the writer still runs: no end yet");
    end_writer();
    struct tkp_record rec;
    int k = tkp_follow_next(f, &rec, 5000);
    cr_assert_eq(k, TKP_FOLLOW_EXITED);
    cr_assert_eq(tkp_follow_next(f, &rec, 5000), TKP_FOLLOW_END);
    cr_assert_null(tkp_follow_warning(f), "a clean end has no warning");
    tkp_follow_close(f);
    capw_free(w);
}

Test(follow, partial_chunk_inotify, .init = setup, .fini = teardown)
{
    partial_chunk(0);
}

Test(follow, partial_chunk_polling, .init = setup, .fini = teardown)
{
    partial_chunk(1);
}

Test(follow, rotation_keeps_names, .init = setup, .fini = teardown)
{
    char p0[128], p1[128];
    snprintf(p0, sizeof(p0), "%s/prog.%d.tokprof", dir, (int)writer);
    snprintf(p1, sizeof(p1), "%s/prog.%d.1.tokprof", dir, (int)writer);
    struct capw *a = capture(1, 3, "kernel_a"), *b = capture(1, 4, "kernel_b");
    size_t la, lb;
    const uint8_t *da = capw_data(a, &la), *db = capw_data(b, &lb);
    put(p0, da, la, "wb");
    struct tkp_follow *f;
    struct tkp_follow_opts o = {.until_exit = 1, .poll_ms = 20};
    char why[256];
    cr_assert_eq(tkp_follow_open(dir, &o, &f, why, sizeof(why)), 0, "%s", why);
    int st;
    const char *n0 = NULL, *n1 = NULL;
    cr_assert_eq(launches(f, 100, &st, &n0), 3);
    put(p1, db, lb, "wb"); /* the writer rotated: file 0 is complete */
    cr_assert_eq(launches(f, 5000, &st, &n1), 4, "the rotated file, read on");
    /* file 0's reader is closed: its strings are freed, and file 1's reader may get the same
     * addresses for its own; a name handed out before stays what it was */
    cr_assert_str_eq(n1, "kernel_b");
    cr_assert_str_eq(n0, "kernel_a", "a name from the first file changed after the rotation");
    cr_assert_eq(tkp_follow_stats(f)->rotations, 1);
    cr_assert_eq(tkp_follow_nprocs(f), 1, "the rotated file is not a process of its own");
    end_writer();
    struct tkp_record rec;
    cr_assert_eq(tkp_follow_next(f, &rec, 5000), TKP_FOLLOW_EXITED);
    cr_assert_eq(tkp_follow_next(f, &rec, 5000), TKP_FOLLOW_END);
    tkp_follow_close(f);
    capw_free(a);
    capw_free(b);
}

Test(follow, torn_tail_of_dead_writer, .init = setup, .fini = teardown)
{
    char path[128];
    snprintf(path, sizeof(path), "%s/prog.%d.tokprof", dir, (int)writer);
    struct capw *w = capture(3, 2, "k");
    size_t len;
    const uint8_t *d = capw_data(w, &len);
    put(path, d, len - 5, "wb");
    end_writer(); /* died mid-chunk */
    struct tkp_follow *f;
    struct tkp_follow_opts o = {.until_exit = 1, .poll_ms = 20};
    char why[256];
    cr_assert_eq(tkp_follow_open(path, &o, &f, why, sizeof(why)), 0, "%s", why);
    int st;
    cr_assert_eq(launches(f, 5000, &st, NULL), 4, "the two whole chunks");
    cr_assert_eq(st, TKP_FOLLOW_EXITED);
    const char *wn = tkp_follow_warning(f);
    cr_assert(wn && strstr(wn, "torn tail"), "%s", wn ? wn : "(none)");
    tkp_follow_close(f);
    capw_free(w);
}

Test(follow, not_a_capture, .init = setup, .fini = teardown)
{
    char path[128], why[256];
    struct tkp_follow *f;
    snprintf(path, sizeof(path), "%s/x.tokprof", dir);
    put(path, (const uint8_t *)"hello, world\n", 13, "wb");
    cr_assert_eq(tkp_follow_open(path, NULL, &f, why, sizeof(why)), TKP_ERR_NOT_CAPTURE);
    cr_assert_null(f);
    cr_assert(strstr(why, "not a tokprof capture"), "%s", why);
    snprintf(path, sizeof(path), "%s/missing", dir);
    cr_assert_eq(tkp_follow_open(path, NULL, &f, why, sizeof(why)), TKP_ERR_IO);
}

/* Two captures of the writer's pid in dir, prog.PID.tokprof (a_chunks chunks of a_per launches of
 * kernel_a) and prog.PID<tag>.tokprof (one chunk of 4 launches of kernel_b), and a follow reader
 * of dir. */
static struct tkp_follow *two_files(const char *tag, int a_chunks, int a_per, struct capw **a,
                                    struct capw **b)
{
    char p0[128], p1[128], why[256];
    snprintf(p0, sizeof(p0), "%s/prog.%d.tokprof", dir, (int)writer);
    snprintf(p1, sizeof(p1), "%s/prog.%d%s.tokprof", dir, (int)writer, tag);
    *a = capture(a_chunks, a_per, "kernel_a"), *b = capture(1, 4, "kernel_b");
    size_t la, lb;
    const uint8_t *da = capw_data(*a, &la), *db = capw_data(*b, &lb);
    put(p0, da, la, "wb");
    put(p1, db, lb, "wb");
    struct tkp_follow *f;
    struct tkp_follow_opts o = {.until_exit = 1, .poll_ms = 20};
    cr_assert_eq(tkp_follow_open(dir, &o, &f, why, sizeof(why)), 0, "%s", why);
    return f;
}

/* tkp_follow_skip: a process the caller wants nothing more of is reported EXITED at its next
 * turn, its later chunks and rotated files not read, while the writer still runs. */
Test(follow, skip_stops_reading, .init = setup, .fini = teardown)
{
    struct capw *a, *b;
    struct tkp_follow *f = two_files(".1", 3, 5, &a, &b); /* the second: a rotated file */
    struct tkp_record rec;
    int k;
    while ((k = tkp_follow_next(f, &rec, 5000)) == TKP_FOLLOW_RECORD && rec.type != TKP_REC_LAUNCH) {
    }
    cr_assert_eq(k, TKP_FOLLOW_RECORD, "a first launch");
    cr_assert_eq(tkp_follow_skip(f, tkp_follow_source(f)), 0);
    cr_assert_eq(tkp_follow_skip(f, 999999999), -1, "no such source");
    cr_assert_eq(tkp_follow_next(f, &rec, 5000), TKP_FOLLOW_EXITED, "at once, the writer alive");
    cr_assert_eq(rec.pid, (uint64_t)writer_pid);
    cr_assert_eq(tkp_follow_next(f, &rec, 5000), TKP_FOLLOW_END);
    cr_assert_eq(tkp_follow_stats(f)->rotations, 0, "the rotated file was not opened");
    cr_assert_eq(tkp_follow_stats(f)->files, 1);
    tkp_follow_close(f);
    capw_free(a);
    capw_free(b);
}

/* Two captures of one pid (a recycled pid, or servers in containers: pid 1 each) are two sources,
 * each delivering its own records, each EXITED once. */
Test(follow, same_pid_two_sources, .init = setup, .fini = teardown)
{
    struct capw *a, *b;
    struct tkp_follow *f = two_files(".alt1", 2, 3, &a, &b); /* a fresh name: not a rotation */
    struct tkp_record rec;
    uint64_t src_a = 0, src_b = 0;
    int na = 0, nb = 0, exited = 0, k;
    end_writer();
    while ((k = tkp_follow_next(f, &rec, 5000)) == TKP_FOLLOW_RECORD || k == TKP_FOLLOW_EXITED) {
        uint64_t src = tkp_follow_source(f);
        cr_assert_eq(rec.pid, (uint64_t)writer_pid);
        if (k == TKP_FOLLOW_EXITED) {
            cr_assert(src == src_a || src == src_b, "EXITED of a source never seen: %llu",
                      (unsigned long long)src);
            exited++;
            continue;
        }
        if (rec.type != TKP_REC_LAUNCH) continue;
        if (!strcmp(rec.launch.name, "kernel_a")) {
            cr_assert(!src_a || src_a == src, "kernel_a from two sources");
            src_a = src, na++;
        } else {
            cr_assert(!src_b || src_b == src, "kernel_b from two sources");
            src_b = src, nb++;
        }
    }
    cr_assert_eq(k, TKP_FOLLOW_END);
    cr_assert_eq(na, 6);
    cr_assert_eq(nb, 4);
    cr_assert(src_a && src_b && src_a != src_b, "one pid, two captures: sources %llu and %llu",
              (unsigned long long)src_a, (unsigned long long)src_b);
    cr_assert_eq(exited, 2);
    tkp_follow_close(f);
    capw_free(a);
    capw_free(b);
}

/* A file whose writer locks it (TKP_FILE_LOCKED): alive while the lock is held, ended once it can
 * be taken, whatever its META pid says (pid 1: init on this host, alive forever; a server's pid
 * in its container). Without the flag, pid 1 is followed on. */
static void locked(int flag)
{
    char path[128];
    snprintf(path, sizeof(path), "%s/srv.1.tokprof", dir);
    struct capw *w = capture_of(1, 2, 3, "k");
    expect_pid = 1;
    size_t len;
    const uint8_t *d = capw_data(w, &len);
    uint8_t *c = malloc(len);
    cr_assert(c);
    memcpy(c, d, len);
    if (flag) c[10] |= TKP_FILE_LOCKED;
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
    cr_assert_geq(fd, 0);
    cr_assert_eq(flock(fd, LOCK_SH | LOCK_NB), 0);
    cr_assert_eq(write(fd, c, len), (ssize_t)len);
    struct tkp_follow *f;
    struct tkp_follow_opts o = {.until_exit = 1, .poll_ms = 20};
    char why[256];
    cr_assert_eq(tkp_follow_open(path, &o, &f, why, sizeof(why)), 0, "%s", why);
    int st;
    cr_assert_eq(launches(f, 300, &st, NULL), 6, "every launch");
    cr_assert_eq(st, TKP_FOLLOW_IDLE, "the writer holds its lock: alive");
    close(fd); /* the writer ends */
    struct tkp_record rec;
    int k = tkp_follow_next(f, &rec, 300);
    if (flag) {
        cr_assert_eq(k, TKP_FOLLOW_EXITED, "the lock is free: the writer ended");
        cr_assert_eq(tkp_follow_next(f, &rec, 300), TKP_FOLLOW_END);
    } else {
        cr_assert_eq(k, TKP_FOLLOW_IDLE, "no flag: pid 1 lives, followed on");
    }
    tkp_follow_close(f);
    capw_free(w);
    free(c);
}

Test(follow, lock_tells_the_writer_ended, .init = setup, .fini = teardown)
{
    locked(1);
}

Test(follow, without_the_lock_flag_pid_decides, .init = setup, .fini = teardown)
{
    locked(0);
}

/* A writer that dies between creating its next rotated file and writing its header (system_live_days
 * under load: check --follow waited for that header forever): the file before's lock is free and
 * the header still not whole, so the process ended; with a warning. Its lock held: it lives. */
Test(follow, rotated_file_without_header, .init = setup, .fini = teardown)
{
    char p0[128], p1[128];
    snprintf(p0, sizeof(p0), "%s/prog.%d.tokprof", dir, (int)writer);
    snprintf(p1, sizeof(p1), "%s/prog.%d.1.tokprof", dir, (int)writer);
    struct capw *w = capture(1, 3, "k");
    size_t len;
    const uint8_t *d = capw_data(w, &len);
    uint8_t *c = malloc(len);
    cr_assert(c);
    memcpy(c, d, len);
    c[10] |= TKP_FILE_LOCKED;
    int fd = open(p0, O_WRONLY | O_CREAT | O_EXCL, 0600);
    cr_assert_geq(fd, 0);
    cr_assert_eq(flock(fd, LOCK_SH | LOCK_NB), 0);
    cr_assert_eq(write(fd, c, len), (ssize_t)len);
    put(p1, (const uint8_t *)"", 0, "wb"); /* created, no header yet */
    struct tkp_follow *f;
    struct tkp_follow_opts o = {.until_exit = 1, .poll_ms = 20};
    char why[256];
    cr_assert_eq(tkp_follow_open(dir, &o, &f, why, sizeof(why)), 0, "%s", why);
    int st;
    cr_assert_eq(launches(f, 300, &st, NULL), 3);
    cr_assert_eq(st, TKP_FOLLOW_IDLE, "file 0's lock held: the writer may still write file 1");
    cr_assert_eq(tkp_follow_stats(f)->rotations, 1);
    close(fd); /* the writer dies */
    struct tkp_record rec;
    cr_assert_eq(tkp_follow_next(f, &rec, 2000), TKP_FOLLOW_EXITED, "waited for a header forever");
    cr_assert_eq(tkp_follow_next(f, &rec, 2000), TKP_FOLLOW_END);
    const char *wn = tkp_follow_warning(f);
    cr_assert(wn && strstr(wn, "no header"), "%s", wn ? wn : "(none)");
    tkp_follow_close(f);
    capw_free(w);
    free(c);
}
