/* The write path every capture file shares (stream files, flight snapshots): creating a file
 * with its header, writing chunks whole, and stopping the capture on the first failure.
 *
 * A full disk, a file-size limit or an unwritable directory stop the capture with one warning
 * line; the program never sees it.
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
 * - Free space: before each chunk the writer asks tkp_file_low_space(); under the floor
 *   (TOKPROF_MIN_FREE_MB / _PCT) the capture stops with one warning, so that a forgotten
 *   always-on capture never takes the host's last gigabyte from its other writers. The check
 *   counts whole blocks and keeps TKP_FLOOR_RESERVE for the capture's last chunk; a last chunk
 *   bigger than what is left is replaced by the LOSS that counts its records (tkp_file_fits). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "core/config.h"
#include "core/log.h"
#include "core/state.h"
#include "sink/file.h"
#include "tokprof/format.h"
#include "tokprof/outdir.h"

static int failed;
static int out_dirfd = -1;  /* the checked output directory: every file is created relative to it */
static int low_warned; /* the free-space warning was given */

/* TOKPROF_KEEP: which name each of the last `keep` files of a kind got (its .altN, 0 none), so
 * that the file K - keep removed is the one this process created under that index. */
struct kept {
    uint16_t *alt; /* keep entries, index % keep; alt + 1, 0 when no file */
    unsigned cap;
};
static struct kept kept[2]; /* TKP_OUT_STREAM, TKP_OUT_SNAPSHOT */

int tkp_file_write(int fd, const void *buf, size_t n)
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

void tkp_file_chunk_header(unsigned char hdr[16], uint32_t zn, uint32_t raw, uint32_t seq)
{
    uint32_t fields[4] = {TKP_CHUNK_MAGIC, zn, raw, seq};
    for (int i = 0; i < 4; i++)
        for (int b = 0; b < 4; b++)
            hdr[i * 4 + b] = (unsigned char)(fields[i] >> (8 * b));
}

/* ---- the output directory ------------------------------------------------------------------ */

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
        why = tkp_outdir_refusal(&st, geteuid(), buf, sizeof buf); /* the rule: tokprof/outdir.h */
    }
    if (why) {
        tkp_warn("output directory %s refused: %s; capture off, the program is unaffected", dir,
                 why);
        if (fd >= 0) close(fd);
        return -1;
    }
    out_dirfd = fd;
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
    snprintf(buf, cap, "%.200s.%d%s%s.tokprof", tkp_cfg.program, (int)getpid(), tag,
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
        unlinkat(out_dirfd, name, 0);
    }
    *slot = (uint16_t)(alt + 1);
}

int tkp_file_create(int kind, unsigned index, unsigned flags, char *path, size_t cap)
{
    char name[NAME_MAX + 1];
    int fd = -1;
    unsigned alt = 0;
    if (out_dirfd < 0) {
        errno = EBADF;
        return -1;
    }
    for (; alt < ALT_MAX; alt++) {
        file_name(name, sizeof name, kind, index, alt);
        /* O_EXCL: never an existing file, nor the target of a link (a symbolic link is an
         * existing name: EEXIST); O_NOFOLLOW says the same again */
        fd = openat(out_dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd >= 0 || errno != EEXIST) break;
        if (alt == 0) tkp_debug("%s exists; a fresh name is used", name);
    }
    full_path(path, cap, name);
    if (fd < 0) return -1; /* errno: EEXIST after ALT_MAX names, or the open's */
    /* A file is locked shared before its header is written, for as long as the process may
     * write it (the kernel lets go when it closes it or ends, however it ends): a follower
     * (tokprof ingest --watch, top) that can take it exclusively knows the writer is done with
     * it, whatever PID namespace the writer ran in: a stream's process ended, a snapshot is
     * whole. Never blocks; without the lock, no flag. */
    if (!flock(fd, LOCK_SH | LOCK_NB)) flags |= TKP_FILE_LOCKED;
    unsigned char hdr[TKP_FILE_HEADER_LEN] = {0};
    memcpy(hdr, TKP_FILE_MAGIC, TKP_FILE_MAGIC_LEN);
    hdr[8] = TKP_FORMAT_VERSION;
    hdr[10] = (unsigned char)flags;
    hdr[12] = TKP_FILE_HEADER_LEN;
    if (tkp_file_write(fd, hdr, sizeof hdr)) {
        int e = errno;
        close(fd);
        unlinkat(out_dirfd, name, 0); /* ours, and nothing worth keeping: no empty husk */
        errno = e;
        return -1;
    }
    keep_note(kind, index, alt);
    return fd;
}

void tkp_file_fail(const char *path, int err)
{
    if (failed) return;
    failed = 1;
    tkp_warn("cannot write %s: %s; capture stopped, the program is unaffected", path,
             strerror(err));
    atomic_store(&tkp_state, -1);
}

int tkp_file_failed(void)
{
    return failed;
}

void tkp_file_reset(void)
{
    /* The child reads its settings again at its first CUDA call (it may have changed
     * TOKPROF_OUT): the directory is opened and checked again then. */
    if (out_dirfd >= 0) close(out_dirfd);
    out_dirfd = -1;
    low_warned = 0;
    for (int k = 0; k < 2; k++) {
        free(kept[k].alt); /* the parent's files are the parent's to remove */
        kept[k].alt = NULL;
        kept[k].cap = 0;
    }
    failed = 0;
}

int tkp_file_open_dir(void)
{
    if (out_dirfd < 0 && open_dir()) return -1;
    failed = 0;
    return 0;
}

int tkp_file_dir_writable(void)
{
    return faccessat(out_dirfd, ".", W_OK | X_OK, AT_EACCESS);
}

/* Room above the floor in the output filesystem: 1 with *room set, 0 when it cannot be told. */
static int room_above_floor(uint64_t *room, uint64_t *avail, uint64_t *floor, uint64_t *unit)
{
    struct statvfs sv;
    if (out_dirfd < 0 || fstatvfs(out_dirfd, &sv)) return 0; /* cannot tell: writes will */
    *unit = sv.f_frsize ? sv.f_frsize : sv.f_bsize;
    if (!*unit) *unit = 4096;
    *avail = (uint64_t)sv.f_bavail * *unit;
    uint64_t total = (uint64_t)sv.f_blocks * *unit;
    *floor = tkp_outdir_floor(total, tkp_prod.min_free_bytes, tkp_prod.min_free_pct);
    *room = *avail >= *floor ? *avail - *floor : 0;
    return 1;
}

/* What writing `n` bytes at a file's end can take: its blocks, and one more for the partly
 * filled block the file may already end with. */
static uint64_t blocks_for(uint64_t n, uint64_t unit)
{
    return (n + unit - 1) / unit * unit + unit;
}

int tkp_file_low_space(uint64_t need, const char *what)
{
    uint64_t room, avail, floor, unit;
    if (!room_above_floor(&room, &avail, &floor, &unit)) return 0;
    /* TKP_FLOOR_RESERVE stays free for the chunk that ends the capture (what the rings hold) */
    if (room >= blocks_for(need, unit) + TKP_FLOOR_RESERVE) return 0;
    if (!low_warned) {
        low_warned = 1;
        tkp_warn("%s: %.1f MB free, too close to the floor of %.1f MB (TOKPROF_MIN_FREE_MB, "
                 "TOKPROF_MIN_FREE_PCT); %s, the program is unaffected",
                 tkp_cfg.out_dir, (double)avail / 1048576.0, (double)floor / 1048576.0, what);
    }
    return 1;
}

int tkp_file_fits(uint64_t n)
{
    uint64_t room, avail, floor, unit;
    if (!room_above_floor(&room, &avail, &floor, &unit)) return 1;
    return room >= blocks_for(n, unit);
}

void tkp_file_test_delay(void)
{
    if (tkp_prod.test_delay_ms) { /* test-only: a disk that takes this long per chunk */
        struct timespec d = {tkp_prod.test_delay_ms / 1000,
                             (long)(tkp_prod.test_delay_ms % 1000) * 1000000L};
        nanosleep(&d, NULL);
    }
}
