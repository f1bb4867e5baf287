/* The rules of TOKPROF_OUT, shared by the shim (shim/sink/file.c, which applies them) and
 * `tokprof doctor` (which says beforehand what the shim will do): who may own the output
 * directory, and the free-space floor. Header-only, no state: the shim and the decoder share
 * nothing else (docs/ARCHITECTURE.md). docs/SECURITY.md argues the ownership rule. */
#ifndef TOKPROF_OUTDIR_H
#define TOKPROF_OUTDIR_H

#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/types.h>

/* Why the directory `st` (as opened, O_NOFOLLOW: a symbolic link never gets here) must not
 * receive the files of a process with effective uid `me`, or NULL when it may. The owner must be
 * `me`, or root with the sticky bit (/tmp, /var/tmp: nobody else can remove or rename what we
 * create there, and O_EXCL keeps us out of what they created); a directory that others may write
 * must have the sticky bit, or they could swap our files for links between two of our
 * operations. The reason is a static string or written into buf (cap bytes). */
static inline const char *tkp_outdir_refusal(const struct stat *st, uid_t me, char *buf, size_t cap)
{
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

/* The free-space floor of a filesystem of `total` bytes: TOKPROF_MIN_FREE_MB (min_free_bytes) or
 * TOKPROF_MIN_FREE_PCT of its size, whichever is higher. The shim stops writing (one warning, a
 * LOSS record) before the free space falls under it. */
static inline uint64_t tkp_outdir_floor(uint64_t total, uint64_t min_free_bytes, unsigned pct)
{
    uint64_t p = total / 100 * pct;
    return p > min_free_bytes ? p : min_free_bytes;
}

#endif
