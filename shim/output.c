/* Where finished chunks go: stream files with a size cap, rotation and a keep count, or the
 * flight recorder (flight.c). Also the production settings (TOKPROF_MODE, TOKPROF_MAX_MB, ...)
 * and the write path every capture file shares.
 *
 * A full disk, a file-size limit or an unwritable directory stop the capture with one warning
 * line; the program never sees it. A failed write is cut back to the last whole chunk, so the
 * file decodes without a torn tail.
 *
 * The shim runs with the privileges of whatever it is preloaded into (a root server, every
 * process of a host through /etc/ld.so.preload), in a directory others may write: no file it
 * creates may ever be someone else's (docs/SECURITY.md).
 * - The output directory is opened once, O_NOFOLLOW, and checked through that descriptor: a
 *   symbolic link, a directory of another user (root's with the sticky bit, /tmp, excepted) or
 *   one others may write without the sticky bit is refused with one warning line, capture off.
 *   Every file is then created and removed relative to that descriptor, so renaming or
 *   re-linking the path after the check changes nothing.
 * - Files are created O_CREAT | O_EXCL | O_NOFOLLOW, never truncated: a name that is taken (a
 *   planted symbolic or hard link, an older capture of a recycled pid) gets a fresh one,
 *   "<name>.alt<N>.tokprof". TOKPROF_KEEP removes only files this process created.
 * - Free space: before each chunk the writer asks tkp_out_low_space(); under the floor
 *   (TOKPROF_MIN_FREE_MB / _PCT) the capture stops with one warning, so that a forgotten
 *   always-on capture never takes the host's last gigabyte from its other writers. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "flight.h"
#include "output.h"
#include "tokprof/format.h"

struct tkp_prod_config tkp_prod;

static struct {
    int fd;
    unsigned index;         /* rotation: 0 is <program>.<pid>.tokprof, K is <...>.K.tokprof */
    uint64_t bytes;         /* written to the current file */
    uint64_t last_chunk;    /* bytes of the last chunk: the rotation guess for the next */
    uint32_t fseq;          /* seq of the next chunk in the current file */
    int rotate;             /* the next put starts file index+1 */
    int last;               /* the exit's chunk comes next: it starts no new file */
    int failed;
    char path[PATH_MAX];
    int dirfd;              /* the checked output directory: every file is created relative to it */
    int low_warned;         /* the free-space warning was given */
} O = {.fd = -1, .dirfd = -1};

/* TOKPROF_KEEP: which name each of the last `keep` files of a kind got (its .altN, 0 none), so
 * that the file K - keep removed is the one this process created under that index. */
struct kept {
    uint16_t *alt;      /* keep entries, index % keep; alt + 1, 0 when no file */
    unsigned cap;
};
static struct kept kept[2]; /* TKP_OUT_STREAM, TKP_OUT_SNAPSHOT */

/* ---- settings -------------------------------------------------------------------------------- */

/* A positive decimal number (MB and seconds may be fractional: "0.25"); def when unset or bad. */
static double parse_num(const char *var, double def, double lo, double hi)
{
    const char *v = tkp_env(var);
    if (!v || !*v) return def;
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (errno || *end || !(x >= lo && x <= hi)) {
        tkp_warn("%s=%s is not a number in [%g, %g]; using %g", var, v, lo, hi, def);
        return def;
    }
    return x;
}

static int parse_signal(const char *v)
{
    if (!strcasecmp(v, "none") || !strcmp(v, "0")) return 0;
    if (!strncasecmp(v, "SIG", 3)) v += 3;
    if (!strcasecmp(v, "USR1")) return SIGUSR1;
    if (!strcasecmp(v, "USR2")) return SIGUSR2;
    if (!strcasecmp(v, "HUP")) return SIGHUP;
    if (!strcasecmp(v, "PWR")) return SIGPWR;
    if (!strncasecmp(v, "RTMIN+", 6)) {
        char *end;
        long n = strtol(v + 6, &end, 10);
        if (!*end && n >= 0 && SIGRTMIN + n <= SIGRTMAX) return SIGRTMIN + (int)n;
        return -1;
    }
    char *end;
    long n = strtol(v, &end, 10);
    if (*v && !*end && n > 0 && n < NSIG && n != SIGKILL && n != SIGSTOP) return (int)n;
    return -1;
}

/* "step>40ms", "step>0.5s", "step>3*p50" (also "3xp50"). */
static int parse_step_trigger(const char *v)
{
    if (strncmp(v, "step>", 5)) return -1;
    v += 5;
    char *end;
    double x = strtod(v, &end);
    if (end == v || !(x > 0)) return -1;
    if ((*end == '*' || *end == 'x') && !strcmp(end + 1, "p50")) {
        tkp_prod.step_trigger = 2;
        tkp_prod.step_factor = x;
        return 0;
    }
    double unit = !strcmp(end, "ms") ? 1e6 : !strcmp(end, "us") ? 1e3 : !strcmp(end, "s") ? 1e9 : 0;
    if (!unit || x * unit > 1e18) return -1;
    tkp_prod.step_trigger = 1;
    tkp_prod.step_ns = (uint64_t)(x * unit);
    return 0;
}

void tkp_prod_config_load(void)
{
    memset(&tkp_prod, 0, sizeof tkp_prod);
    const char *v = tkp_env("TOKPROF_MODE");
    if (v && *v) {
        if (!strcmp(v, "flight")) tkp_prod.flight = 1;
        else if (strcmp(v, "stream")) tkp_warn("TOKPROF_MODE=%s is not stream|flight; using stream", v);
    }
    /* Bounded by default (docs/OPERATIONS.md, "Disk"): 256 MB files, the newest 4 kept, so
     * one process never holds more than about 1 GiB; 0 lifts either bound. */
    tkp_prod.max_bytes = (uint64_t)(parse_num("TOKPROF_MAX_MB", TKP_DEFAULT_MAX_MB, 0, 1 << 24) *
                                    1048576.0);
    tkp_prod.keep = (unsigned)parse_num("TOKPROF_KEEP", TKP_DEFAULT_KEEP, 0, 65535);
    tkp_prod.min_free_bytes =
        (uint64_t)(parse_num("TOKPROF_MIN_FREE_MB", TKP_DEFAULT_MIN_FREE_MB, 0, 1 << 30) *
                   1048576.0);
    tkp_prod.min_free_pct =
        (unsigned)parse_num("TOKPROF_MIN_FREE_PCT", TKP_DEFAULT_MIN_FREE_PCT, 0, 100);
    tkp_prod.flight_bytes = (uint64_t)(parse_num("TOKPROF_FLIGHT_MB", 64, 0.01, 1 << 16) * 1048576.0);
    tkp_prod.before_ns = (uint64_t)(parse_num("TOKPROF_FLIGHT_BEFORE_S", 10, 0, 86400) * 1e9);
    tkp_prod.after_ns = (uint64_t)(parse_num("TOKPROF_FLIGHT_AFTER_S", 2, 0, 86400) * 1e9);
    tkp_prod.min_gap_ns = (uint64_t)(parse_num("TOKPROF_TRIGGER_MIN_S", 60, 0, 86400 * 365) * 1e9);
    tkp_prod.test_delay_ms = (unsigned)parse_num("TOKPROF_TEST_WRITER_DELAY_MS", 0, 0, 600000);
    v = tkp_env("TOKPROF_TRIGGER");
    if (v && *v && parse_step_trigger(v)) {
        tkp_prod.step_trigger = 0;
        tkp_warn("TOKPROF_TRIGGER=%s is not step>Nms|step>Ns|step>F*p50; no step trigger", v);
    }
    tkp_prod.signal = SIGUSR2;
    v = tkp_env("TOKPROF_TRIGGER_SIGNAL");
    if (v && *v) {
        int s = parse_signal(v);
        if (s < 0) tkp_warn("TOKPROF_TRIGGER_SIGNAL=%s is not a signal (USR1, USR2, RTMIN+N, a "
                            "number, none); using USR2", v);
        else tkp_prod.signal = s;
    }
    v = tkp_env("TOKPROF_TRIGGER_FILE");
    if (v && *v && strlen(v) < sizeof tkp_prod.trigger_file) strcpy(tkp_prod.trigger_file, v);
    else if (v && *v) tkp_warn("TOKPROF_TRIGGER_FILE is longer than %zu bytes; no file trigger",
                               sizeof tkp_prod.trigger_file - 1);
}

/* ---- the write path -------------------------------------------------------------------------- */

int tkp_out_write(int fd, const void *buf, size_t n)
{
    /* RLIMIT_FSIZE: write(2) past the limit fails with EFBIG *and* raises SIGXFSZ, whose default
     * action kills the process. The writer thread blocks every signal already; the final flush
     * runs on a program thread at exit, and the first file is created on one: block it here, and
     * swallow the signal if our write raised it. Chunk-rate syscalls, never on the launch path. */
    sigset_t xfsz, old, before;
    sigemptyset(&xfsz);
    sigaddset(&xfsz, SIGXFSZ);
    pthread_sigmask(SIG_BLOCK, &xfsz, &old);
    sigpending(&before);
    int rc = 0, err = 0;
    const char *p = buf;
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            rc = -1;
            err = errno;
            break;
        }
        p += w;
        n -= (size_t)w;
    }
    if (rc && err == EFBIG && !sigismember(&before, SIGXFSZ) && !sigismember(&old, SIGXFSZ)) {
        struct timespec zero = {0, 0};
        sigtimedwait(&xfsz, NULL, &zero);
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc) errno = err; /* else untouched: the program's errno, when a program thread writes */
    return rc;
}

void tkp_out_chunk_header(unsigned char hdr[16], uint32_t zn, uint32_t raw, uint32_t seq)
{
    uint32_t fields[4] = {TKP_CHUNK_MAGIC, zn, raw, seq};
    for (int i = 0; i < 4; i++)
        for (int b = 0; b < 4; b++) hdr[i * 4 + b] = (unsigned char)(fields[i] >> (8 * b));
}

/* ---- the output directory ------------------------------------------------------------------ */

/* Why `st` (the directory as opened) must not receive our files, or NULL when it may. The owner
 * must be us, or root with the sticky bit (/tmp, /var/tmp: nobody else can remove or rename
 * what we create there, and O_EXCL keeps us out of what they created); a directory that others
 * may write must have the sticky bit, or they could swap our files for links between two of
 * our operations. */
static const char *dir_refusal(const struct stat *st, char *buf, size_t cap)
{
    uid_t me = geteuid();
    if (!S_ISDIR(st->st_mode)) return "not a directory";
    if (st->st_uid != me && !(st->st_uid == 0 && (st->st_mode & S_ISVTX))) {
        snprintf(buf, cap, "owned by uid %u, not by this process's uid %u", (unsigned)st->st_uid,
                 (unsigned)me);
        return buf;
    }
    if ((st->st_mode & S_IWOTH) && !(st->st_mode & S_ISVTX))
        return "writable by others without the sticky bit";
    return NULL;
}

/* Opens and checks TOKPROF_OUT, creating it (mode 0700) when it is missing but its parent is
 * not. 0, or -1 after one warning line. */
static int open_dir(void)
{
    char dir[sizeof tkp_cfg.out_dir];
    snprintf(dir, sizeof dir, "%s", tkp_cfg.out_dir);
    /* "caps/" would make open follow a link named caps: the trailing slashes go */
    for (size_t n = strlen(dir); n > 1 && dir[n - 1] == '/'; n--) dir[n - 1] = 0;
    const int oflags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
    int fd = open(dir, oflags);
    if (fd < 0 && errno == ENOENT) {
        if (mkdir(dir, 0700) && errno != EEXIST) {
            tkp_warn("cannot create %s: %s; capture off, the program is unaffected", dir,
                     strerror(errno));
            return -1;
        }
        fd = open(dir, oflags);
    }
    struct stat st;
    char buf[96];
    const char *why = NULL;
    if (fd < 0) {
        int e = errno;
        if ((e == ELOOP || e == ENOTDIR) && !lstat(dir, &st) && S_ISLNK(st.st_mode))
            why = "a symbolic link";
        if (!why) {
            tkp_warn("cannot use %s: %s; capture off, the program is unaffected", dir,
                     strerror(e));
            return -1;
        }
    } else if (fstat(fd, &st)) {
        why = strerror(errno);
    } else {
        why = dir_refusal(&st, buf, sizeof buf);
    }
    if (why) {
        tkp_warn("output directory %s refused: %s; capture off, the program is unaffected", dir,
                 why);
        if (fd >= 0) close(fd);
        return -1;
    }
    O.dirfd = fd;
    return 0;
}

/* ---- files ----------------------------------------------------------------------------------- */

/* "<program>.<pid><tag>[.alt<N>].tokprof": tag "" (the first stream file), ".K" (rotated),
 * ".snapK" (flight snapshots). */
static void file_name(char *buf, size_t cap, int kind, unsigned index, unsigned alt)
{
    char tag[24] = "", a[16] = "";
    if (kind == TKP_OUT_SNAPSHOT) snprintf(tag, sizeof tag, ".snap%u", index);
    else if (index) snprintf(tag, sizeof tag, ".%u", index);
    if (alt) snprintf(a, sizeof a, ".alt%u", alt);
    /* the program name is cut so that the tags always fit NAME_MAX: .altN must stay distinct */
    snprintf(buf, cap, "%.200s.%d%s%s.tokprof", program_invocation_short_name, (int)getpid(), tag,
             a);
}

static void full_path(char *buf, size_t cap, const char *name)
{
    snprintf(buf, cap, "%s/%s", tkp_cfg.out_dir, name);
}

#define ALT_MAX 100 /* fresh names tried before giving up on a file */

/* TOKPROF_KEEP: `index` of `kind` was just created as .alt`alt`; removes the file of index -
 * keep, the one this process created under that index. */
static void keep_note(int kind, unsigned index, unsigned alt)
{
    struct kept *k = &kept[kind];
    if (!tkp_prod.keep) return;
    if (k->cap != tkp_prod.keep) {
        free(k->alt);
        k->alt = calloc(tkp_prod.keep, sizeof *k->alt);
        k->cap = k->alt ? tkp_prod.keep : 0;
        if (!k->alt) return; /* out of memory: nothing removed, the disk floor still holds */
    }
    uint16_t *slot = &k->alt[index % k->cap];
    if (index >= k->cap && *slot) {
        char name[NAME_MAX + 1];
        file_name(name, sizeof name, kind, index - k->cap, *slot - 1u);
        unlinkat(O.dirfd, name, 0);
    }
    *slot = (uint16_t)(alt + 1);
}

int tkp_out_create(int kind, unsigned index, unsigned flags, char *path, size_t cap)
{
    char name[NAME_MAX + 1];
    int fd = -1;
    unsigned alt = 0;
    if (O.dirfd < 0) {
        errno = EBADF;
        return -1;
    }
    for (; alt < ALT_MAX; alt++) {
        file_name(name, sizeof name, kind, index, alt);
        /* O_EXCL: never an existing file, nor the target of a link (a symbolic link is an
         * existing name: EEXIST); O_NOFOLLOW says the same again */
        fd = openat(O.dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd >= 0 || errno != EEXIST) break;
        if (alt == 0) tkp_debug("%s exists; a fresh name is used", name);
    }
    full_path(path, cap, name);
    if (fd < 0) return -1; /* errno: EEXIST after ALT_MAX names, or the open's */
    unsigned char hdr[TKP_FILE_HEADER_LEN] = {0};
    memcpy(hdr, TKP_FILE_MAGIC, TKP_FILE_MAGIC_LEN);
    hdr[8] = TKP_FORMAT_VERSION;
    hdr[10] = (unsigned char)flags;
    hdr[12] = TKP_FILE_HEADER_LEN;
    if (tkp_out_write(fd, hdr, sizeof hdr)) {
        int e = errno;
        close(fd);
        unlinkat(O.dirfd, name, 0); /* ours, and nothing worth keeping: no empty husk */
        errno = e;
        return -1;
    }
    keep_note(kind, index, alt);
    return fd;
}

void tkp_out_fail(const char *path, int err)
{
    if (O.failed) return;
    O.failed = 1;
    tkp_warn("cannot write %s: %s; capture stopped, the program is unaffected", path,
             strerror(err));
    atomic_store(&tkp_state, -1);
}

int tkp_out_low_space(uint64_t need, const char *what)
{
    struct statvfs sv;
    if (O.dirfd < 0 || fstatvfs(O.dirfd, &sv)) return 0; /* cannot tell: writes will */
    uint64_t unit = sv.f_frsize ? sv.f_frsize : sv.f_bsize;
    uint64_t avail = (uint64_t)sv.f_bavail * unit, total = (uint64_t)sv.f_blocks * unit;
    uint64_t floor = tkp_prod.min_free_bytes;
    uint64_t pct = total / 100 * tkp_prod.min_free_pct;
    if (pct > floor) floor = pct;
    if (avail >= floor && avail - floor >= need) return 0;
    if (!O.low_warned) {
        O.low_warned = 1;
        tkp_warn("%s: %.1f MB free, too close to the floor of %.1f MB (TOKPROF_MIN_FREE_MB, "
                 "TOKPROF_MIN_FREE_PCT); %s, the program is unaffected",
                 tkp_cfg.out_dir, (double)avail / 1048576.0, (double)floor / 1048576.0, what);
    }
    return 1;
}

/* ---- stream files ---------------------------------------------------------------------------- */

static int open_stream_file(unsigned index)
{
    int fd = tkp_out_create(TKP_OUT_STREAM, index, TKP_FILE_STREAM, O.path, sizeof O.path);
    if (fd < 0) return -1;
    O.fd = fd;
    O.index = index;
    O.bytes = TKP_FILE_HEADER_LEN;
    return 0;
}

int tkp_out_open(void)
{
    if (O.dirfd < 0 && open_dir()) return -1;
    O.failed = 0;
    O.fseq = 0;
    O.rotate = 0;
    O.last = 0;
    O.last_chunk = 0;
    if (tkp_prod.flight) {
        /* Nothing is written until a trigger: check now that a snapshot could be, so that a
         * bad directory is one warning at start rather than a surprise at the first incident. */
        if (faccessat(O.dirfd, ".", W_OK | X_OK, AT_EACCESS)) {
            tkp_warn("cannot write in %s: %s; capture off, the program is unaffected",
                     tkp_cfg.out_dir, strerror(errno));
            return -1;
        }
        snprintf(O.path, sizeof O.path, "%s", tkp_cfg.out_dir);
        tkp_flight_start();
        return 0;
    }
    if (open_stream_file(0)) {
        tkp_warn("cannot create %s: %s; capture off, the program is unaffected", O.path,
                 strerror(errno));
        return -1;
    }
    return 0;
}

void tkp_out_last_chunk(void)
{
    O.last = 1;
}

uint32_t tkp_out_chunk_begin(uint32_t gseq, int *first)
{
    *first = 0;
    /* Flight: the process's chunk count, from 1 (a snapshot's META chunk is 0; flight.c). */
    if (tkp_prod.flight) return O.fseq = gseq + 1;
    /* Rotate before a file would pass the cap, guessing this chunk is as big as the last; a file
     * always holds at least one chunk besides its header. */
    if (tkp_prod.max_bytes && O.fseq > 0 && O.bytes + O.last_chunk > tkp_prod.max_bytes &&
        !O.last) {
        O.rotate = 1;
        O.fseq = 0;
    }
    *first = O.fseq == 0;
    return O.fseq;
}

int tkp_out_chunk_put(const void *frame, size_t zn, uint32_t raw, uint64_t t_begin,
                      uint64_t t_end)
{
    if (O.failed) return -1;
    if (tkp_prod.test_delay_ms) { /* test-only: a disk that takes this long per chunk */
        struct timespec d = {tkp_prod.test_delay_ms / 1000,
                             (long)(tkp_prod.test_delay_ms % 1000) * 1000000L};
        nanosleep(&d, NULL);
    }
    if (tkp_prod.flight) return tkp_flight_put(frame, zn, raw, O.fseq, t_begin, t_end);
    if (O.rotate) {
        O.rotate = 0;
        if (O.fd >= 0) close(O.fd);
        O.fd = -1;
        if (open_stream_file(O.index + 1)) {
            tkp_out_fail(O.path, errno);
            return -1;
        }
    }
    if (O.fd < 0) return -1;
    unsigned char hdr[TKP_CHUNK_HEADER_LEN];
    tkp_out_chunk_header(hdr, (uint32_t)zn, raw, O.fseq);
    if (tkp_out_write(O.fd, hdr, sizeof hdr) || tkp_out_write(O.fd, frame, zn)) {
        int e = errno;
        if (ftruncate(O.fd, (off_t)O.bytes)) { /* best effort: keep the file whole */ }
        tkp_out_fail(O.path, e);
        return -1;
    }
    O.bytes += sizeof hdr + zn;
    O.last_chunk = sizeof hdr + zn;
    O.fseq++;
    return 0;
}

void tkp_out_poll(uint64_t now)
{
    if (tkp_prod.flight && !O.failed) tkp_flight_poll(now);
}

void tkp_out_close(void)
{
    if (tkp_prod.flight) tkp_flight_close();
    if (O.fd >= 0) close(O.fd);
    O.fd = -1;
}

void tkp_out_after_fork(void)
{
    if (O.fd >= 0) close(O.fd); /* the parent's file: its fd, not ours to write */
    O.fd = -1;
    /* The child reads its settings again at its first CUDA call (it may have changed
     * TOKPROF_OUT): the directory is opened and checked again then. */
    if (O.dirfd >= 0) close(O.dirfd);
    O.dirfd = -1;
    O.low_warned = 0;
    for (int k = 0; k < 2; k++) {
        free(kept[k].alt); /* the parent's files are the parent's to remove */
        kept[k].alt = NULL;
        kept[k].cap = 0;
    }
    O.failed = 0;
    O.fseq = 0;
    O.rotate = 0;
    O.index = 0;
    tkp_flight_after_fork();
    tkp_trigger_after_fork();
}

const char *tkp_out_path(void)
{
    return O.path;
}

int tkp_out_meta_keys(void)
{
    return tkp_prod.flight ? tkp_flight_meta_keys() : 0;
}

void tkp_out_meta_pack(msgpack_packer *pk)
{
    if (tkp_prod.flight) tkp_flight_meta_pack(pk);
}
