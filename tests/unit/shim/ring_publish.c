/* What the writer sees of a thread's ring (shim/record/ring.c, tkp_ring_info): a ring it can see
 * is whole. A thread claims a ring and waits; the writer's side looks as soon as the ring is
 * visible, with nothing but the ring's own publication between the two threads (as the writer's
 * emit_losses does), and must read that thread's tid and index: for a new ring, and for a freed
 * one handed to the next thread. Issue 33: ring_claim() set them after publishing, so the writer
 * could read a new ring's zero or the previous thread's tid into a THREAD record.
 *
 * A plain program (criterion's runner does not run under ThreadSanitizer). In the TOKPROF_TSAN
 * build (label tsan, scripts/test.sh) the old order is a reported race and exit 66 whatever the
 * timing; in every build a wrong tid or index seen is exit 1. */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/config.h"
#include "core/state.h"
#include "record/ring.h"

struct claimer {
    int tid;            /* the thread's own; read after the join */
    _Atomic int looked; /* set by the writer's side once it has read the ring's thread */
};

static void *claim_and_wait(void *arg)
{
    struct claimer *c = arg;
    c->tid = (int)syscall(SYS_gettid);
    if (!tkp_ring_self()) return arg;
    while (!atomic_load_explicit(&c->looked, memory_order_acquire))
        sched_yield();
    return NULL;
}

static void drop_event(void *ctx, const struct tkp_ev *e, uint32_t thread, int os_tid)
{
    (void)ctx, (void)e, (void)thread, (void)os_tid;
}

/* One thread claims ring 0; returns 0 when the writer saw its tid and index `want_idx`. */
static int check(const char *what, uint32_t want_idx)
{
    struct claimer c = {0};
    pthread_t t;
    void *failed;
    int tid, idx;
    uint64_t dropped;
    if (pthread_create(&t, NULL, claim_and_wait, &c)) return 1;
    while ((idx = tkp_ring_info(0, &tid, &dropped)) < 0)
        sched_yield();
    atomic_store_explicit(&c.looked, 1, memory_order_release);
    pthread_join(t, &failed);
    if (failed) {
        fprintf(stderr, "ring_publish: %s: the thread got no ring\n", what);
        return 1;
    }
    if (tid != c.tid || idx != (int)want_idx) {
        fprintf(stderr, "ring_publish: %s: the writer saw thread %d, tid %d; the thread is %u, "
                        "tid %d\n", what, idx, tid, want_idx, c.tid);
        return 1;
    }
    return 0;
}

int main(void)
{
    tkp_cfg.ring_kb = 4;
    tkp_cfg.buffer_mb = 1;
    atomic_store(&tkp_state, 1);
    if (check("new ring", 0)) return 1;
    tkp_rings_drain(drop_event, NULL); /* the exited thread's ring is freed */
    if (check("reused ring", 1)) return 1;
    if (tkp_rings_count() != 1) {
        fprintf(stderr, "ring_publish: the freed ring was not reused\n");
        return 1;
    }
    puts("ring_publish: the writer saw each thread's tid and index");
    return 0;
}
