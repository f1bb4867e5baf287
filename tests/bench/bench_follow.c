/* The follow reader's lag and CPU (docs/BENCH.md "Live"): follows DIR (follow.h, until every
 * process has ended) with no consumer, and prints what it delivered, its CPU time, and per chunk
 * two figures on the capture's clock (CLOCK_MONOTONIC): the lag from the chunk's newest event (its
 * largest host_ns) to the moment its last record reached the caller (end to end: the shim's wait
 * until it writes the chunk and its compression, then the follower), and the follower's own part,
 * from the chunk's first record delivered to its last (reading, decompressing, decoding: a chunk
 * is delivered only once all of it is there, so its first record comes as soon as its write is
 * seen).
 *
 * usage: bench_follow DIR */
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>

#include "base/sort.h"
#include "capture/follow.h"
#include "model/model.h"

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void line(const char *what, uint64_t *v, size_t n)
{
    tkp_sort_u64(v, n);
    printf("%s (%zu chunks): p50 %.2f ms, p99 %.2f ms, max %.2f ms\n", what, n,
           (double)tkp_pct_sorted(v, n, 0.5) / 1e6, (double)tkp_pct_sorted(v, n, 0.99) / 1e6,
           n ? (double)v[n - 1] / 1e6 : 0.0);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: bench_follow DIR\n");
        return 2;
    }
    struct tkp_follow *f;
    struct tkp_follow_opts o = {.until_exit = 1};
    char why[256];
    if (tkp_follow_open(argv[1], &o, &f, why, sizeof(why))) {
        fprintf(stderr, "bench_follow: %s\n", why);
        return 2;
    }
    size_t cap = 1 << 16, n = 0;
    uint64_t *lag = malloc(cap * sizeof(*lag)), *own = malloc(cap * sizeof(*own));
    uint64_t records = 0, newest = 0, first = 0, last = 0, cstart = 0;
    int in_chunk = 0, k;
    struct tkp_record rec;
    while (lag && own && (k = tkp_follow_next(f, &rec, 1000)) != TKP_FOLLOW_END && k >= 0) {
        /* a chunk's records come one after the other: its last one was delivered at `last`
         * when the next chunk starts or the reader has nothing more */
        int ends = k != TKP_FOLLOW_RECORD || rec.type == TKP_REC_CHUNK;
        if (ends && in_chunk && newest && n < cap && last > newest) {
            lag[n] = last - newest;
            own[n++] = last - cstart;
        }
        if (ends) in_chunk = 0, newest = 0;
        if (k != TKP_FOLLOW_RECORD) continue;
        records++;
        last = now_ns();
        if (!first) first = last;
        if (rec.type == TKP_REC_CHUNK) in_chunk = 1, cstart = last;
        if (tkp_record_has_time(rec.type) && rec.host_ns > newest) newest = rec.host_ns;
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double cpu = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
                 (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
    double wall = (double)(last - first) / 1e9;
    printf("records %llu in %.3f s (%.0f records/s delivered), CPU %.3f s (%.1f %% of one core)\n",
           (unsigned long long)records, wall, wall > 0 ? (double)records / wall : 0.0, cpu,
           wall > 0 ? 100.0 * cpu / wall : 0.0);
    line("lag behind each chunk's newest event", lag, n);
    line("the follower's part, a chunk's first record to its last", own, n);
    printf("peak RSS %ld kB\n", ru.ru_maxrss);
    free(lag);
    free(own);
    tkp_follow_close(f);
    return 0;
}
