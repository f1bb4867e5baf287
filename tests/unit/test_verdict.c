/* The verdict's one rule (decoder/model/figures.h) on splits worked out by hand: each word at and
 * around its bounds, the caps a step's parts get (a wait longer than the step, a wait longer than
 * the GPU worked), and the launch-call estimate of model.h (tkp_launch_paced) on a gap sequence. */
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

Test(verdict, launch_paced)
{
    /* gaps 10, 4, 30, 6, 9: the smallest so far is 10, then 4 (its cap 8) */
    uint64_t min1 = 0, gaps[] = {10, 4, 30, 6, 9}, want[] = {10, 4, 8, 6, 8}, sum = 0;
    for (int i = 0; i < 5; i++) {
        uint64_t got = tkp_launch_paced(gaps[i], &min1);
        cr_assert_eq(got, want[i], "gap %d: %llu, expected %llu", i, (unsigned long long)got,
                     (unsigned long long)want[i]);
        sum += got;
    }
    cr_assert_eq(sum, 36);
    cr_assert_eq(min1, 5); /* the smallest gap + 1 */
    min1 = 0; /* a gap of 0 (a coarse clock): nothing of later gaps counts as launch */
    cr_assert_eq(tkp_launch_paced(0, &min1), 0);
    cr_assert_eq(tkp_launch_paced(50, &min1), 0);
}
