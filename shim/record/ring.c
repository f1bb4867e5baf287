/* Per-thread single-producer single-consumer rings.
 *
 * The launch path does: read TLS, reserve a slot (one compare against a cached tail), fill 64
 * bytes, publish the head with a release store. No lock, no allocation, no syscall. A full ring
 * drops the event and counts it; the count reaches the capture as a LOSS record.
 *
 * A ring is mmap'ed once per thread (the only syscall a thread ever pays, at its first event;
 * populated then, so that no page fault lands on a later launch) and
 * returned to a free list when the thread exits and the writer has drained it. The number of
 * rings alive is bounded by TOKPROF_BUFFER_MB / TOKPROF_RING_KB; a thread that finds none counts
 * its events as dropped.
 *
 * The writer sleeps between drains; a producer wakes it when its ring reaches a quarter of its
 * capacity (tkp_ring_nudge: one futex wake, only when the writer sleeps and the ring is that full,
 * looked at every eighth of the ring; LTTng-UST's RING_BUFFER_WAKEUP_BY_WRITER). So a burst is
 * drained when it needs to be, whatever the writer's period: loss needs the writer to be kept
 * off the CPU while three quarters of a ring fill, or a producer faster than the writer for
 * longer than a ring lasts. That rare wake is the one syscall an application thread makes after
 * its ring exists; it keeps errno.
 *
 * Event field use: ring_types.h. */
#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/config.h"
#include "core/log.h"
#include "record/ring.h"
#include "tokprof/format.h"

#define TKP_RINGS_MAX 4096

_Atomic uint64_t tkp_ringless_drops;

static struct tkp_ring *rings[TKP_RINGS_MAX];
static _Atomic uint32_t nrings;       /* ring memory objects published in rings[] */
static _Atomic uint32_t next_thread;  /* capture-local thread indices */
static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER; /* registration only */
static pthread_key_t exit_key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;
/* The writer's sleep (tkp_rings_wait): the futex word producers bump to wake it, and whether it
 * sleeps now. */
static _Atomic uint32_t wake_seq;
static _Atomic int writer_sleeps;
static unsigned ring_scale = 1;
static uint64_t ring_bytes; /* mmap'ed for rings so far (under reg_lock) */
static tkp_ring_claim_fn claim_hook;
static tkp_ring_exit_fn exit_hook;

void tkp_rings_set_hooks(tkp_ring_claim_fn on_claim, tkp_ring_exit_fn on_exit)
{
    claim_hook = on_claim;
    exit_hook = on_exit;
}

void tkp_rings_set_scale(unsigned scale)
{
    ring_scale = scale ? scale : 1;
}

static void on_thread_exit(void *p)
{
    struct tkp_ring *r = p;
    if (!r) return;
    if (exit_hook) exit_hook(r, tkp_stamp()); /* its pending steps end with it */
    tkp_tls.ring = NULL;
    atomic_store_explicit(&r->state, TKP_RING_EXITED, memory_order_release);
}

static void make_key(void)
{
    pthread_key_create(&exit_key, on_thread_exit);
}

/* Makes r the calling thread's, whole before anyone can see it: its tid, index and user bytes
 * are set, then the state OWNED is published (release); the writer reads them after it sees that
 * state (tkp_ring_info, acquire). Called under reg_lock, or in a fork child's only thread. */
static void ring_claim(struct tkp_ring *r)
{
    memset(r->user, 0, sizeof r->user);
    r->fast_limit = 0; /* the first launch takes the full path, which sets it */
    r->os_tid = (int)syscall(SYS_gettid);
    r->thread_idx = atomic_fetch_add(&next_thread, 1);
    if (claim_hook) claim_hook(r);
    atomic_store_explicit(&r->state, TKP_RING_OWNED, memory_order_release);
}

static struct tkp_ring *ring_get_slow(void);

/* A thread's first event: one mmap, which must not touch the program's errno. */
struct tkp_ring *tkp_ring_get_slow(void)
{
    int saved = errno;
    struct tkp_ring *r = ring_get_slow();
    errno = saved;
    return r;
}

/* Rings freed so far (the writer's, after a thread's exit; a fork's). A thread refused a ring
 * asks again only once this has moved: until then each of its events costs a load here, not the
 * registry's lock. */
static _Atomic uint32_t frees;
static atomic_flag refused_said = ATOMIC_FLAG_INIT;

static struct tkp_ring *ring_get_slow(void)
{
    if (atomic_load(&tkp_state) != 1) return NULL;
    uint32_t freed = atomic_load_explicit(&frees, memory_order_acquire);
    if (tkp_tls.ringless == freed + 1) return NULL;
    pthread_once(&key_once, make_key);
    struct tkp_ring *r = NULL;
    pthread_mutex_lock(&reg_lock);
    uint32_t n = atomic_load(&nrings);
    for (uint32_t i = 0; i < n; i++) { /* reuse a ring the writer has drained and freed */
        /* Only a thread holding reg_lock takes a free ring (the writer only frees): it stays
         * free until ring_claim publishes it whole. */
        if (atomic_load_explicit(&rings[i]->state, memory_order_acquire) == TKP_RING_FREE) {
            r = rings[i];
            ring_claim(r);
            break;
        }
    }
    /* TOKPROF_RING_KB times the scale, or the plain size when the budget has no room for that */
    uint64_t budget = (uint64_t)tkp_cfg.buffer_mb << 20;
    size_t bytes = (size_t)tkp_cfg.ring_kb << 10;
    if (bytes * ring_scale + ring_bytes <= budget) bytes *= ring_scale;
    size_t cap = 1;
    while (cap * 2 * sizeof(struct tkp_ev) <= bytes) cap *= 2;
    if (!r && n < TKP_RINGS_MAX && ring_bytes + bytes <= budget) {
        size_t hdr = (sizeof(struct tkp_ring) + 63) & ~(size_t)63;
        void *mem = mmap(NULL, hdr + cap * sizeof(struct tkp_ev), PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
        if (mem != MAP_FAILED) {
            r = mem;
            r->slots = (struct tkp_ev *)((char *)mem + hdr);
            r->mask = cap - 1;
            r->nudge_mask = cap >= 8 ? cap / 8 - 1 : 0;
            r->mem_idx = n;
            ring_bytes += bytes;
            ring_claim(r);
            rings[n] = r;
            atomic_store_explicit(&nrings, n + 1, memory_order_release);
        }
    }
    pthread_mutex_unlock(&reg_lock);
    if (!r) {
        tkp_tls.ringless = freed + 1;
        if (!atomic_flag_test_and_set(&refused_said))
            tkp_warn("thread %ld gets no ring: TOKPROF_BUFFER_MB=%u holds %u rings of up to %u KiB "
                     "(TOKPROF_RING_KB=%u, four times that with GPU time on); its records are "
                     "dropped and counted until a ring is freed (said once: raise "
                     "TOKPROF_BUFFER_MB or lower TOKPROF_RING_KB)",
                     syscall(SYS_gettid), tkp_cfg.buffer_mb, n, tkp_cfg.ring_kb * ring_scale,
                     tkp_cfg.ring_kb);
        else
            tkp_debug("no ring for thread %ld (budget TOKPROF_BUFFER_MB=%u)", syscall(SYS_gettid),
                      tkp_cfg.buffer_mb);
        return NULL;
    }
    tkp_tls.ring = r;
    pthread_setspecific(exit_key, r);
    return r;
}

void tkp_ring_count_drop(struct tkp_ring *r)
{
    atomic_store_explicit(&r->dropped, atomic_load_explicit(&r->dropped, memory_order_relaxed) + 1,
                          memory_order_relaxed);
}

static uint64_t fill_at_wake(const struct tkp_ring *r)
{
    return (r->mask + 1) / 4;
}

void tkp_ring_nudge(struct tkp_ring *r, uint64_t h)
{
    /* Pairs with the fence in tkp_rings_wait: either this thread sees the writer asleep, or the
     * writer sees this head before it sleeps. */
    atomic_thread_fence(memory_order_seq_cst);
    if (!atomic_load_explicit(&writer_sleeps, memory_order_relaxed)) return;
    uint64_t t = atomic_load_explicit(&r->tail, memory_order_acquire);
    r->tail_cache = t;
    if (h - t < fill_at_wake(r)) return;
    int saved = errno;
    atomic_fetch_add_explicit(&wake_seq, 1, memory_order_release);
    syscall(SYS_futex, &wake_seq, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
    errno = saved;
}

/* 1 when some ring holds a quarter of its capacity or more. */
static int rings_fill(void)
{
    uint32_t n = atomic_load_explicit(&nrings, memory_order_acquire);
    for (uint32_t i = 0; i < n; i++) {
        struct tkp_ring *r = rings[i];
        if (atomic_load_explicit(&r->state, memory_order_acquire) == TKP_RING_FREE) continue;
        uint64_t h = atomic_load_explicit(&r->head, memory_order_acquire);
        if (h - atomic_load_explicit(&r->tail, memory_order_relaxed) >= fill_at_wake(r)) return 1;
    }
    return 0;
}

void tkp_rings_wait(uint64_t timeout_ns)
{
    uint32_t seq = atomic_load_explicit(&wake_seq, memory_order_acquire);
    atomic_store_explicit(&writer_sleeps, 1, memory_order_relaxed);
    atomic_thread_fence(memory_order_seq_cst);
    if (!rings_fill()) {
        struct timespec ts = {(time_t)(timeout_ns / 1000000000ull),
                              (long)(timeout_ns % 1000000000ull)};
        /* returns at once when a producer bumped the word since it was read */
        syscall(SYS_futex, &wake_seq, FUTEX_WAIT_PRIVATE, seq, &ts, NULL, 0);
    }
    atomic_store_explicit(&writer_sleeps, 0, memory_order_relaxed);
}

size_t tkp_rings_drain(tkp_drain_fn fn, void *ctx)
{
    size_t total = 0;
    uint32_t n = atomic_load_explicit(&nrings, memory_order_acquire);
    for (uint32_t i = 0; i < n; i++) {
        struct tkp_ring *r = rings[i];
        int state = atomic_load_explicit(&r->state, memory_order_acquire);
        if (state == TKP_RING_FREE) continue;
        uint64_t t = atomic_load_explicit(&r->tail, memory_order_relaxed);
        uint64_t h = atomic_load_explicit(&r->head, memory_order_acquire);
        for (; t != h; t++) fn(ctx, &r->slots[t & r->mask], r->thread_idx, r->os_tid);
        total += (size_t)(h - atomic_load_explicit(&r->tail, memory_order_relaxed));
        atomic_store_explicit(&r->tail, h, memory_order_release);
        if (state == TKP_RING_EXITED &&
            atomic_load_explicit(&r->head, memory_order_acquire) == h) {
            /* The owner is gone and everything it wrote is out: the memory can serve a new
             * thread. Its final drop count goes out first, as a LOSS event of its own. */
            uint64_t dropped = atomic_load(&r->dropped);
            if (dropped) {
                struct tkp_ev loss = {.type = TKP_REC_LOSS, .ts = 0, .a = dropped};
                fn(ctx, &loss, r->thread_idx, r->os_tid);
            }
            atomic_store(&r->head, 0);
            atomic_store(&r->tail, 0);
            r->tail_cache = 0;
            atomic_store(&r->dropped, 0);
            atomic_store_explicit(&r->state, TKP_RING_FREE, memory_order_release);
            atomic_fetch_add_explicit(&frees, 1, memory_order_release);
        }
    }
    return total;
}

uint32_t tkp_rings_count(void)
{
    return atomic_load_explicit(&nrings, memory_order_acquire);
}

int tkp_ring_info(uint32_t i, int *os_tid, uint64_t *dropped)
{
    if (i >= atomic_load_explicit(&nrings, memory_order_acquire)) return -1;
    struct tkp_ring *r = rings[i];
    /* OWNED or EXITED: its thread's fields were set before (ring_claim) */
    if (atomic_load_explicit(&r->state, memory_order_acquire) == TKP_RING_FREE) return -1;
    *os_tid = r->os_tid;
    *dropped = atomic_load_explicit(&r->dropped, memory_order_relaxed);
    return (int)r->thread_idx;
}

void tkp_rings_reset_after_fork(void)
{
    /* Only the forking thread exists in the child. Its ring keeps serving it, emptied; every
     * other ring belonged to a thread that is not here. */
    uint32_t n = atomic_load(&nrings);
    atomic_store(&next_thread, 0);
    atomic_store(&writer_sleeps, 0); /* the parent's writer, not here */
    for (uint32_t i = 0; i < n; i++) {
        struct tkp_ring *r = rings[i];
        atomic_store(&r->head, 0);
        atomic_store(&r->tail, 0);
        r->tail_cache = 0;
        atomic_store(&r->dropped, 0);
        if (r == tkp_tls.ring) ring_claim(r);
        else atomic_store(&r->state, TKP_RING_FREE);
    }
    atomic_fetch_add(&frees, 1); /* the forking thread may ask again */
    pthread_mutex_init(&reg_lock, NULL);
}
