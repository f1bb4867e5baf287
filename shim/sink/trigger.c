/* Flight-recorder triggers: a slow step (evaluated by the writer on the STEP records it encodes),
 * a signal, a touched file, and tokprof_trigger() from the program.
 *
 * Only the signal handler and tokprof_trigger() run on program threads; both are a few atomic
 * stores, async-signal-safe, never blocking. Everything else runs on the writer thread.
 *
 * The signal: TOKPROF_GPU=trigger (activity.c) also listens to SIGUSR2, and installs its handler
 * only when SIGUSR2 is still at its default. In flight mode ours is installed first (the writer
 * starts before CUPTI), so one handler serves both: an accepted trigger arms the GPU window
 * through tkp_gpu_arm() (flight.c). */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/base.h"
#include "core/clock.h"
#include "core/config.h"
#include "core/log.h"
#include "core/state.h"
#include "sink/trigger.h"
#include "tokprof/format.h"
#include "tokprof/tokprof.h"

#define WIN 128        /* token steps in the running p50 */
#define WIN_MIN 32     /* steps seen before a relative trigger may fire */
#define FILE_POLL_NS 100000000ull

static struct {
    _Atomic unsigned sig_count;
    _Atomic uint64_t sig_ns;
    _Atomic int api_state; /* 0 idle, 1 being written, 2 ready */
    _Atomic unsigned api_extra;
    uint64_t api_ns;
    char api_why[64];
    /* steps (writer thread) */
    int step_pending;
    uint64_t step_at, step_dur, step_limit;
    uint64_t win[WIN];
    unsigned nwin, since_p50;
    uint64_t p50;
    /* file (writer thread) */
    int file_exists;
    struct timespec file_mtime;
    uint64_t file_next_ns;
    int file_pending;
    uint64_t file_at;
    int installed;
} trig;

static void on_signal(int sig)
{
    (void)sig;
    int saved = errno;
    atomic_store(&trig.sig_ns, tkp_now_ns());
    atomic_fetch_add(&trig.sig_count, 1);
    errno = saved;
}

static void file_state(int *exists, struct timespec *mtime)
{
    struct stat st;
    *exists = stat(tkp_prod.trigger_file, &st) == 0;
    if (*exists) *mtime = st.st_mtim;
}

void tkp_trigger_start(void)
{
    if (tkp_prod.trigger_file[0]) file_state(&trig.file_exists, &trig.file_mtime);
    if (!tkp_prod.signal || trig.installed) return;
    struct sigaction sa, old;
    /* Never take a signal from the program: only one it left at its default. */
    if (sigaction(tkp_prod.signal, NULL, &old) || old.sa_handler != SIG_DFL ||
        (old.sa_flags & SA_SIGINFO)) {
        tkp_warn("signal %d has a handler of the program's; no signal trigger", tkp_prod.signal);
        return;
    }
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART;
    sigfillset(&sa.sa_mask);
    if (sigaction(tkp_prod.signal, &sa, NULL) == 0) trig.installed = 1;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

void tkp_trigger_on_step(int kind, uint64_t begin_ns, uint64_t end_ns)
{
    if (!tkp_prod.flight || !tkp_prod.step_trigger || kind != TKP_STEP_TOKEN || end_ns <= begin_ns)
        return;
    uint64_t dur = end_ns - begin_ns;
    uint64_t limit = 0;
    if (tkp_prod.step_trigger == 1) limit = tkp_prod.step_ns;
    else if (trig.nwin >= WIN_MIN && trig.p50)
        limit = (uint64_t)(tkp_prod.step_factor * (double)trig.p50);
    if (limit && dur > limit && !trig.step_pending) {
        trig.step_pending = 1;
        trig.step_at = begin_ns; /* the window before is what led up to the slow step */
        trig.step_dur = dur;
        trig.step_limit = limit;
    }
    if (tkp_prod.step_trigger != 2) return;
    trig.win[trig.nwin++ % WIN] = dur;
    /* p50 of the last WIN steps, refreshed every 16: a sort of 128 numbers, writer thread */
    if (++trig.since_p50 >= 16 || trig.nwin == WIN_MIN) {
        uint64_t tmp[WIN];
        unsigned n = trig.nwin < WIN ? trig.nwin : WIN;
        memcpy(tmp, trig.win, n * sizeof *tmp);
        qsort(tmp, n, sizeof *tmp, cmp_u64);
        trig.p50 = tmp[n / 2];
        trig.since_p50 = 0;
    }
}

static void poll_file(uint64_t now)
{
    if (!tkp_prod.trigger_file[0] || now < trig.file_next_ns) return;
    trig.file_next_ns = now + FILE_POLL_NS;
    int exists;
    struct timespec m = {0, 0};
    file_state(&exists, &m);
    if (exists && (!trig.file_exists || m.tv_sec != trig.file_mtime.tv_sec ||
                   m.tv_nsec != trig.file_mtime.tv_nsec) && !trig.file_pending) {
        trig.file_pending = 1;
        trig.file_at = now;
    }
    trig.file_exists = exists;
    if (exists) trig.file_mtime = m;
}

int tkp_trigger_take(uint64_t now, uint64_t *at_ns, char *why, size_t cap, unsigned *merged)
{
    poll_file(now);
    int kind = TKP_TRIG_NONE;
    unsigned extra = 0;
    if (trig.step_pending) {
        trig.step_pending = 0;
        kind = TKP_TRIG_STEP;
        *at_ns = trig.step_at;
        snprintf(why, cap, "step of %.3f ms > %.3f ms", (double)trig.step_dur / 1e6,
                 (double)trig.step_limit / 1e6);
    }
    if (atomic_load(&trig.api_state) == 2) {
        if (kind) extra++;
        else {
            kind = TKP_TRIG_API;
            *at_ns = trig.api_ns;
            snprintf(why, cap, "%s", trig.api_why);
        }
        extra += atomic_exchange(&trig.api_extra, 0);
        atomic_store(&trig.api_state, 0);
    }
    unsigned sigs = atomic_exchange(&trig.sig_count, 0);
    if (sigs) {
        if (kind) extra += sigs;
        else {
            kind = TKP_TRIG_SIGNAL;
            *at_ns = atomic_load(&trig.sig_ns);
            snprintf(why, cap, "signal %d", tkp_prod.signal);
            extra += sigs - 1;
        }
    }
    if (trig.file_pending) {
        trig.file_pending = 0;
        if (kind) extra++;
        else {
            kind = TKP_TRIG_FILE;
            *at_ns = trig.file_at;
            snprintf(why, cap, "%s touched", tkp_prod.trigger_file);
        }
    }
    *merged = extra;
    return kind;
}

void tkp_trigger_after_fork(void)
{
    /* The handler stays installed (inherited); the child starts with nothing pending. */
    atomic_store(&trig.sig_count, 0);
    atomic_store(&trig.api_state, 0);
    atomic_store(&trig.api_extra, 0);
    trig.step_pending = trig.file_pending = 0;
    trig.nwin = trig.since_p50 = 0;
    trig.p50 = 0;
}

const char *tkp_trigger_name(int kind)
{
    switch (kind) {
    case TKP_TRIG_STEP: return "step";
    case TKP_TRIG_SIGNAL: return "signal";
    case TKP_TRIG_FILE: return "file";
    case TKP_TRIG_API: return "api";
    default: return "none";
    }
}

/* ---- public (include/tokprof/tokprof.h) ------------------------------------------------------ */

TKP_EXPORT void tokprof_trigger(const char *why)
{
    int saved = errno;
    if (atomic_load_explicit(&tkp_state, memory_order_acquire) == 1 && tkp_prod.flight) {
        int idle = 0;
        if (atomic_compare_exchange_strong(&trig.api_state, &idle, 1)) {
            trig.api_ns = tkp_now_ns();
            size_t n = 0;
            if (why)
                while (n < sizeof trig.api_why - 1 && why[n]) n++;
            if (why) memcpy(trig.api_why, why, n);
            trig.api_why[n] = 0;
            atomic_store(&trig.api_state, 2);
        } else {
            atomic_fetch_add(&trig.api_extra, 1); /* merged into the pending one */
        }
    }
    errno = saved;
}
