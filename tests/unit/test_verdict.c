/* The verdict's one rule (decoder/model/figures.h) on splits worked out by hand: each word at and
 * around its bounds, the caps a step's parts get (a wait longer than the step, a wait longer than
 * the GPU worked), and the launch-call estimate of model.h (tkp_launch_paced) on gap sequences. */
#include <criterion/criterion.h>
#include <string.h>

#include "model/figures.h"
#include "model/model.h"

static struct tkp_verdict of(uint64_t time, uint64_t sync, uint64_t gpu, uint64_t launch)
{
    struct tkp_split sp = {1, 0, 0, 0, 0};
    tkp_split_add(&sp, time, sync, gpu, launch);
    struct tkp_verdict v;
    tkp_verdict_make(&sp, &v);
    return v;
}

Test(verdict, words)
{
    /* a quarter of the time waiting on a working GPU is GPU-bound, just under is not */
    cr_assert_str_eq(of(1000, 250, 1000, 0).word, "gpu-bound");
    cr_assert_str_eq(of(1000, 249, 1000, 0).word, "host-bound");
    /* launch calls against the host's own code: a tie goes to launch */
    cr_assert_str_eq(of(1000, 0, 0, 500).word, "launch-bound");
    cr_assert_str_eq(of(1000, 0, 0, 499).word, "host-bound");
    struct tkp_verdict v = of(1000, 100, 1000, 300);
    cr_assert_float_eq(v.gpu_share, 0.1, 1e-12);
    cr_assert_float_eq(v.launch_share, 0.3, 1e-12);
    cr_assert_float_eq(v.own_share, 0.6, 1e-12);
    cr_assert_null(v.why);
}

Test(verdict, caps)
{
    /* a wait on an idle GPU (the GPU worked 100 of the 900 waited) is not the GPU's */
    struct tkp_verdict v = of(1000, 900, 100, 0);
    cr_assert_str_eq(v.word, "host-bound");
    cr_assert_float_eq(v.gpu_share, 0.1, 1e-12);
    cr_assert_float_eq(v.idle_wait_share, 0.8, 1e-12);
    cr_assert_float_eq(v.own_share, 0.1, 1e-12);
    /* a wait longer than the step is the step; launch time at most what is left */
    v = of(1000, 5000, 5000, 700);
    cr_assert_float_eq(v.gpu_share, 1.0, 1e-12);
    cr_assert_float_eq(v.launch_share, 0.0, 1e-12);
    v = of(1000, 400, 1000, 900);
    cr_assert_float_eq(v.launch_share, 0.6, 1e-12);
    cr_assert_float_eq(v.own_share, 0.0, 1e-12);
    /* summed over steps, not averaged: a long host step outweighs short GPU-bound ones */
    struct tkp_split sp = {1, 0, 0, 0, 0};
    for (int i = 0; i < 3; i++)
        tkp_split_add(&sp, 100, 90, 90, 0);
    tkp_split_add(&sp, 2000, 0, 0, 0);
    tkp_verdict_make(&sp, &v);
    cr_assert_str_eq(v.word, "host-bound");
}

Test(verdict, unknown)
{
    struct tkp_split none = {0, 1000, 500, 500, 0}, empty = {1, 0, 0, 0, 0};
    struct tkp_verdict v;
    char buf[256];
    tkp_verdict_make(&none, &v); /* no GPU records: a wait cannot be told from a wake-up */
    cr_assert_str_eq(v.word, "unknown");
    tkp_verdict_text(&v, buf, sizeof(buf));
    cr_assert_str_eq(buf, "unknown: GPU-bound or host-bound needs GPU records");
    tkp_verdict_make(&empty, &v);
    cr_assert_str_eq(v.word, "unknown");
    cr_assert_float_eq(v.own_share, 0.0, 1e-12);
}

Test(verdict, text)
{
    struct tkp_verdict v = of(1000, 100, 50, 300);
    char buf[256];
    tkp_verdict_text(&v, buf, sizeof(buf));
    cr_assert_str_eq(buf, "host-bound: the host's own code 60.0% of the token steps' time, launch "
                          "calls 30.0%, waiting on the GPU 5.0% (on an idle GPU 5.0%)");
}

static void paced(const uint64_t *gaps, const uint64_t *want, int n)
{
    uint64_t min1 = 0;
    for (int i = 0; i < n; i++) {
        uint64_t got = tkp_launch_paced(gaps[i], &min1);
        cr_assert_eq(got, want[i], "gap %d (%llu ns): %llu, expected %llu", i,
                     (unsigned long long)gaps[i], (unsigned long long)got,
                     (unsigned long long)want[i]);
    }
}

Test(verdict, launch_paced)
{
    /* fast calls: a call costs up to TKP_LAUNCH_CALL_NS (10 us), the rest of a gap is the host's */
    const uint64_t fast[] = {3000, 50000, 2000, 30000, 0, 9000}, fast_w[] = {3000, 10000, 2000, 10000, 0, 9000};
    paced(fast, fast_w, 6);
    /* slow calls (stacks sampled at each launch): up to twice the fastest gap so far */
    const uint64_t slow[] = {20000, 90000, 15000, 40000}, slow_w[] = {20000, 40000, 15000, 30000};
    paced(slow, slow_w, 4);
}
