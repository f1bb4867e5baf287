/* The write path every capture file shares (stream files, flight snapshots): creating a file
 * with its header, writing chunks whole, and stopping the capture on the first failure.
 *
 * A full disk, a file-size limit or an unwritable directory stop the capture with one warning
 * line; the program never sees it. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/config.h"
#include "core/log.h"
#include "core/state.h"
#include "sink/file.h"
#include "sink/prod.h"
#include "tokprof/format.h"

static int failed;

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

int tkp_file_create(const char *path, unsigned flags)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) return -1;
    unsigned char hdr[TKP_FILE_HEADER_LEN] = {0};
    memcpy(hdr, TKP_FILE_MAGIC, TKP_FILE_MAGIC_LEN);
    hdr[8] = TKP_FORMAT_VERSION;
    hdr[10] = (unsigned char)flags;
    hdr[12] = TKP_FILE_HEADER_LEN;
    if (tkp_file_write(fd, hdr, sizeof hdr)) {
        int e = errno;
        close(fd);
        unlink(path); /* nothing of ours worth keeping: no empty husk */
        errno = e;
        return -1;
    }
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
    failed = 0;
}

void tkp_file_stem(char *buf, size_t cap)
{
    snprintf(buf, cap, "%s/%s.%d", tkp_cfg.out_dir, program_invocation_short_name, (int)getpid());
}

int tkp_file_open_dir(void)
{
    struct stat st;
    if (stat(tkp_cfg.out_dir, &st) && errno == ENOENT && mkdir(tkp_cfg.out_dir, 0700) &&
        errno != EEXIST) {
        tkp_warn("cannot create %s: %s; capture off, the program is unaffected", tkp_cfg.out_dir,
                 strerror(errno));
        return -1;
    }
    failed = 0;
    return 0;
}

void tkp_file_test_delay(void)
{
    if (tkp_prod.test_delay_ms) { /* test-only: a disk that takes this long per chunk */
        struct timespec d = {tkp_prod.test_delay_ms / 1000,
                             (long)(tkp_prod.test_delay_ms % 1000) * 1000000L};
        nanosleep(&d, NULL);
    }
}
