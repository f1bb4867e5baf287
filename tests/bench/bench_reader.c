/* Reader throughput: reads a capture with tkp_reader_next() and nothing else, and prints the
 * records delivered, the seconds (CLOCK_MONOTONIC) and records/s. For the decode section of
 * scripts/bench.sh and for profiling the reader alone. With --bulk, the launches and library
 * calls of RUNs are taken a batch at a time (tkp_reader_peek_full / tkp_reader_take_full, as summary
 * reads them; the fleet tables take launches alone, tkp_reader_peek_launches) and the other
 * records one by one.
 * usage: bench_reader [--bulk] CAPTURE */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "capture/reader.h"

int main(int argc, char **argv)
{
    struct tkp_reader *r;
    struct tkp_record rec;
    char why[256];
    struct timespec a, b;
    int bulk = argc == 3 && !strcmp(argv[1], "--bulk");
    if (argc != 2 + bulk) {
        fprintf(stderr, "usage: bench_reader [--bulk] CAPTURE\n");
        return 2;
    }
    clock_gettime(CLOCK_MONOTONIC, &a);
    if (tkp_reader_open(argv[argc - 1], &r, why, sizeof(why))) {
        fprintf(stderr, "bench_reader: %s\n", why);
        return 1;
    }
    int err;
    uint64_t sum = 0;
    struct tkp_run_full rb;
    for (;;) {
        size_t k;
        if (bulk && (k = tkp_reader_peek_full(r, &rb))) {
            for (size_t i = 0; i < k; i++) /* the name id, as summary's model reads it */
                sum += rb.host_ns[i] + (rb.kind[i] ? tkp_run_lib(&rb, i)->op_id : tkp_run_launch(&rb, i)->name_id);
            tkp_reader_take_full(r, &rb, k);
            continue;
        }
        if ((err = tkp_reader_next(r, &rec)) != 1) break;
        sum += rec.host_ns; /* touch the record so that nothing is optimised away */
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    const struct tkp_reader_stats *st = tkp_reader_stats(r);
    double s = (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9;
    printf("%llu records %llu chunks %.3f s %.0f records/s%s (%llu)\n",
           (unsigned long long)st->records, (unsigned long long)st->chunks, s,
           (double)st->records / s, err ? " (stopped early)" : "", (unsigned long long)(sum & 1));
    tkp_reader_close(r);
    return err ? 1 : 0;
}
