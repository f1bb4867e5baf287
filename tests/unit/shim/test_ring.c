/* The per-thread ring (shim/record/ring.c): reserve and commit in order, a full ring drops and
 * counts, a thread that exits hands its drops over as a LOSS event and frees its ring for the
 * next thread, and the floor above hears of claims and exits through its hooks. Criterion runs
 * each test in a process of its own, so each starts with no ring. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "core/config.h"
#include "core/state.h"
#include "record/ring.h"
#include "tokprof/format.h"

#define SLOTS 64 /* TOKPROF_RING_KB=4: 4096 bytes of 64-byte events */

static int claims, exits;
static void on_claim(struct tkp_ring *r)
{
    for (size_t i = 0; i < sizeof r->user; i++)
        cr_assert_eq(r->user[i], 0);
    claims++;
}
static void on_exit_hook(struct tkp_ring *r, uint64_t stamp)
{
    (void)r, (void)stamp;
    exits++;
}

static void setup(void)
{
    tkp_cfg.ring_kb = 4;
    tkp_cfg.buffer_mb = 1;
    atomic_store(&tkp_state, 1);
    tkp_rings_set_hooks(on_claim, on_exit_hook);
}

static int push(uint64_t a)
{
    struct tkp_ring *r = tkp_ring_self();
    cr_assert_not_null(r);
    struct tkp_ev *e = tkp_ring_reserve(r);
    if (!e) return 0;
    e->type = TKP_REC_MARKER;
    e->a = a;
    tkp_ring_commit(r);
    return 1;
}

struct seen {
    uint64_t a[4 * SLOTS];
    int type[4 * SLOTS];
    uint32_t thread[4 * SLOTS];
    int n;
};
static void collect(void *ctx, const struct tkp_ev *e, uint32_t thread, int os_tid)
{
    (void)os_tid;
    struct seen *s = ctx;
    cr_assert_lt(s->n, 4 * SLOTS);
    s->a[s->n] = e->a;
    s->type[s->n] = e->type;
    s->thread[s->n++] = thread;
}

TestSuite(shim_ring, .init = setup);

Test(shim_ring, no_ring_unless_capturing)
{
    atomic_store(&tkp_state, 0);
    cr_assert_null(tkp_ring_self());
    cr_assert_eq(tkp_rings_count(), 0);
}

Test(shim_ring, events_come_out_in_order_once)
{
    for (uint64_t i = 0; i < 10; i++)
        cr_assert(push(100 + i));
    cr_assert_eq(claims, 1);
    struct seen s = {.n = 0};
    cr_assert_eq(tkp_rings_drain(collect, &s), 10);
    cr_assert_eq(s.n, 10);
    for (int i = 0; i < 10; i++)
        cr_assert_eq(s.a[i], 100u + (uint64_t)i);
    s.n = 0;
    cr_assert_eq(tkp_rings_drain(collect, &s), 0, "drained events are gone");
    int tid;
    uint64_t dropped;
    cr_assert_eq(tkp_ring_info(0, &tid, &dropped), 0);
    cr_assert_eq(tid, (int)syscall(SYS_gettid));
    cr_assert_eq(dropped, 0);
}

Test(shim_ring, a_full_ring_drops_and_counts_then_has_room_again)
{
    for (int i = 0; i < SLOTS; i++)
        cr_assert(push((uint64_t)i), "slot %d", i);
    cr_assert_not(push(999));
    cr_assert_not(push(999));
    int tid;
    uint64_t dropped;
    tkp_ring_info(0, &tid, &dropped);
    cr_assert_eq(dropped, 2);
    struct seen s = {.n = 0};
    cr_assert_eq(tkp_rings_drain(collect, &s), SLOTS);
    for (int i = 0; i < SLOTS; i++)
        cr_assert_eq(s.a[i], (uint64_t)i, "the dropped ones never land");
    /* wrapping around: the head passes the end of the slots */
    for (int i = 0; i < SLOTS / 2 + 3; i++)
        cr_assert(push(1000 + (uint64_t)i));
    s.n = 0;
    tkp_rings_drain(collect, &s);
    cr_assert_eq(s.n, SLOTS / 2 + 3);
    cr_assert_eq(s.a[s.n - 1], 1000u + SLOTS / 2 + 2);
}

static void *overfill_and_exit(void *arg)
{
    (void)arg;
    for (int i = 0; i < SLOTS + 5; i++)
        push((uint64_t)i);
    return NULL;
}

Test(shim_ring, an_exited_thread_leaves_its_loss_and_its_ring)
{
    pthread_t t;
    pthread_create(&t, NULL, overfill_and_exit, NULL);
    pthread_join(t, NULL);
    cr_assert_eq(exits, 1, "the exit hook ran on the exiting thread");
    struct seen s = {.n = 0};
    tkp_rings_drain(collect, &s);
    cr_assert_eq(s.n, SLOTS + 1);
    cr_assert_eq(s.type[SLOTS], TKP_REC_LOSS);
    cr_assert_eq(s.a[SLOTS], 5, "its final drop count");
    int tid;
    uint64_t dropped;
    cr_assert_eq(tkp_ring_info(0, &tid, &dropped), -1, "freed");
    /* the next thread gets the same memory, with a new capture-local index */
    cr_assert(push(7));
    cr_assert_eq(tkp_rings_count(), 1);
    s.n = 0;
    tkp_rings_drain(collect, &s);
    cr_assert_eq(s.n, 1);
    cr_assert_eq(s.thread[0], 1);
    cr_assert_eq(claims, 2);
}

/* ---- the writer's sleep (tkp_rings_wait) and the producer's wake (tkp_ring_nudge) ---- */

#define LONG_WAIT_NS (60ull * 1000000000ull)

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void *wait_long(void *arg)
{
    uint64_t t0 = mono_ns();
    tkp_rings_wait(LONG_WAIT_NS);
    *(uint64_t *)arg = mono_ns() - t0;
    return NULL;
}

/* The writer sleeps with a 60 s period; the producer fills a quarter of its ring (16 of 64 slots)
 * after the writer went to sleep: the writer wakes then, not at the end of its period. (Were the
 * producer first, the writer would see the quarter before sleeping and not sleep at all: the
 * test passes either way, and fails only if the wake is lost, by minutes.) */
Test(shim_ring, a_quarter_full_ring_wakes_the_sleeping_writer, .timeout = 120)
{
    for (uint64_t i = 0; i < SLOTS / 4 - 5; i++)
        cr_assert(push(i)); /* under a quarter: no reason to wake */
    uint64_t slept = 0;
    pthread_t w;
    pthread_create(&w, NULL, wait_long, &slept);
    usleep(200 * 1000); /* most likely asleep by now */
    for (uint64_t i = 0; i < 8; i++)
        cr_assert(push(i)); /* crosses 16 at a multiple of 8: the nudge */
    pthread_join(w, NULL);
    cr_assert_lt(slept, LONG_WAIT_NS / 2, "woken by the ring after %.3f s", slept / 1e9);
}

/* Under a quarter the writer sleeps its period (and the producer makes no system call). */
Test(shim_ring, a_ring_under_a_quarter_lets_the_writer_sleep)
{
    for (uint64_t i = 0; i < SLOTS / 4 - 1; i++)
        cr_assert(push(i));
    uint64_t t0 = mono_ns();
    tkp_rings_wait(100 * 1000000ull);
    cr_assert_geq(mono_ns() - t0, 90 * 1000000ull, "a futex wait does not end early");
}

/* With GPU time on, init.c asks rings four times the size, within TOKPROF_BUFFER_MB. */
Test(shim_ring, rings_scale_within_the_budget)
{
    tkp_rings_set_scale(4);
    cr_assert(push(1));
    struct seen s = {.n = 0};
    cr_assert_eq(tkp_ring_self()->mask + 1, 4 * SLOTS);
    tkp_rings_drain(collect, &s);
}

static void *push_one(void *arg)
{
    (void)arg;
    push(1);
    *(uint64_t *)arg = tkp_ring_self()->mask + 1;
    return NULL;
}

Test(shim_ring, a_scaled_ring_past_the_budget_is_the_plain_size)
{
    /* 192 KiB rings (2048 slots, the largest power of two that fits), 768 KiB scaled (8192): the
     * 1 MiB budget holds one scaled ring, then only a plain one */
    tkp_cfg.ring_kb = 192;
    tkp_rings_set_scale(4);
    cr_assert(push(1));
    cr_assert_eq(tkp_ring_self()->mask + 1, 8192);
    uint64_t cap = 0;
    pthread_t t;
    pthread_create(&t, NULL, push_one, &cap);
    pthread_join(t, NULL);
    cr_assert_eq(cap, 2048);
}

/* The launch fast path's bound (tkp_ring_fast_refresh, issue 32): every head below fast_limit has
 * a free slot by the cached tail and a commit with no nudge due; fast_limit itself is the first
 * head that does not (the ring full, or (h + 1) a multiple of nudge_mask + 1). A bound past a nudge
 * point would let launches skip the writer's wake-up; one past the cached tail, overwrite slots
 * the writer has not read. */
Test(shim_ring, fast_limit_stops_at_nudge_and_full)
{
    cr_assert(push(1));
    struct tkp_ring *r = tkp_ring_self();
    cr_assert_eq(r->nudge_mask, SLOTS / 8 - 1);
    struct seen s = {0};
    int nudges = 0, fulls = 0;
    for (int round = 0; round < 3 * SLOTS; round++) {
        tkp_ring_fast_refresh(r);
        uint64_t h = atomic_load(&r->head), lim = r->fast_limit;
        for (uint64_t x = h; x < lim; x++) {
            cr_assert_leq(x - r->tail_cache, r->mask, "head %lu: the slot is the writer's", x);
            cr_assert_neq((x + 1) & r->nudge_mask, 0, "head %lu: a nudge is due", x);
        }
        int at_nudge = ((lim + 1) & r->nudge_mask) == 0, at_full = lim == r->tail_cache + r->mask + 1;
        cr_assert(at_nudge || at_full, "head %lu: fast_limit %lu stops short", h, lim);
        nudges += at_nudge, fulls += at_full && !at_nudge;
        if (!push(round)) { /* full: the writer drains, as it would */
            s.n = 0;
            tkp_rings_drain(collect, &s);
        }
        if (round % 5 == 0) push(round); /* another hook's event moves the head too */
    }
    cr_assert_gt(nudges, 0);
    cr_assert_gt(fulls, 0);
}
