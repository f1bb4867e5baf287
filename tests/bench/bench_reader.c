/* Reader throughput: reads a capture with tkp_reader_next() and nothing else, and prints the
 * records delivered, the seconds (CLOCK_MONOTONIC) and records/s. For the decode section of
 * scripts/bench.sh and for profiling the reader alone.
 * usage: bench_reader CAPTURE */
#include <stdio.h>
#include <time.h>

#include "capture/reader.h"

int main(int argc, char **argv)
{
    struct tkp_reader *r;
    struct tkp_record rec;
    char why[256];
    struct timespec a, b;
    if (argc != 2) {
        fprintf(stderr, "usage: bench_reader CAPTURE\n");
        return 2;
    }
    clock_gettime(CLOCK_MONOTONIC, &a);
    if (tkp_reader_open(argv[1], &r, why, sizeof(why))) {
        fprintf(stderr, "bench_reader: %s\n", why);
        return 1;
    }
    int err;
    uint64_t sum = 0;
    while ((err = tkp_reader_next(r, &rec)) == 1)
        sum += rec.host_ns; /* touch the record so that nothing is optimised away */
    clock_gettime(CLOCK_MONOTONIC, &b);
    const struct tkp_reader_stats *st = tkp_reader_stats(r);
    double s = (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9;
    printf("%llu records %llu chunks %.3f s %.0f records/s%s (%llu)\n",
           (unsigned long long)st->records, (unsigned long long)st->chunks, s,
           (double)st->records / s, err ? " (stopped early)" : "", (unsigned long long)(sum & 1));
    tkp_reader_close(r);
    return err ? 1 : 0;
}
