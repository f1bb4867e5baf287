/* simgpu streams and events (the FIFO/legacy rules themselves live in timeline.c). */
#include <stdlib.h>
#include <string.h>

#include "sim.h"

#define LOCKED_RESOLVE(s, h, ptsz)                                                                \
    sim_ensure_init();                                                                            \
    pthread_mutex_lock(&sim_lock);                                                                \
    struct sim_stream *s = tl_resolve(h, ptsz);                                                   \
    if (!s) {                                                                                     \
        pthread_mutex_unlock(&sim_lock);                                                          \
        return CUDA_ERROR_INVALID_HANDLE;                                                         \
    }

SIM_EXPORT CUresult cuStreamCreateWithPriority(CUstream *phStream, unsigned int flags, int priority)
{
    if (!phStream)
        return CUDA_ERROR_INVALID_VALUE;
    sim_ensure_init();
    pthread_mutex_lock(&sim_lock);
    *phStream = (CUstream)tl_new_stream(STREAM_CREATED, flags, priority);
    pthread_mutex_unlock(&sim_lock);
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuStreamCreate(CUstream *phStream, unsigned int flags)
{
    return cuStreamCreateWithPriority(phStream, flags, 0);
}

/* Like CUDA, destroying a stream with pending work is allowed; the work "completes" anyway. */
SIM_EXPORT CUresult cuStreamDestroy_v2(CUstream h)
{
    pthread_mutex_lock(&sim_lock);
    struct sim_stream *s = (struct sim_stream *)h;
    if (!s || h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD || s->magic != MAGIC_STREAM ||
        s->kind != STREAM_CREATED) {
        pthread_mutex_unlock(&sim_lock);
        return CUDA_ERROR_INVALID_HANDLE;
    }
    tl_unlink_stream(s);
    pthread_mutex_unlock(&sim_lock);
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuStreamDestroy(CUstream h) { return cuStreamDestroy_v2(h); }

/* Synchronising the legacy stream behaves like waiting for a marker enqueued on it: it also
 * waits for work already issued to blocking streams. */
static CUresult stream_sync(CUstream h, int ptsz)
{
    LOCKED_RESOLVE(s, h, ptsz);
    if (s->cap) {
        pthread_mutex_unlock(&sim_lock);
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
    simtime_t t = s->kind == STREAM_LEGACY ? tl_ready(s, 0) : s->tail;
    pthread_mutex_unlock(&sim_lock);
    tlog_flush();
    sim_wait_until(t);
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuStreamSynchronize(CUstream h) { return stream_sync(h, 0); }
SIM_EXPORT CUresult cuStreamSynchronize_ptsz(CUstream h) { return stream_sync(h, 1); }

static CUresult stream_query(CUstream h, int ptsz)
{
    LOCKED_RESOLVE(s, h, ptsz);
    if (s->cap) {
        pthread_mutex_unlock(&sim_lock);
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
    simtime_t t = s->kind == STREAM_LEGACY ? tl_ready(s, 0) : s->tail;
    pthread_mutex_unlock(&sim_lock);
    return sim_zero() || sim_now() >= t ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

SIM_EXPORT CUresult cuStreamQuery(CUstream h) { return stream_query(h, 0); }
SIM_EXPORT CUresult cuStreamQuery_ptsz(CUstream h) { return stream_query(h, 1); }

static struct sim_event *ev_of(CUevent e)
{
    struct sim_event *ev = (struct sim_event *)e;
    return ev && ev->magic == MAGIC_EVENT ? ev : NULL;
}

/* Waiting on an event recorded inside a capture joins the capture (fork/join across streams);
 * otherwise the stream's later work starts no earlier than the event. */
static CUresult stream_wait_event(CUstream h, CUevent e, int ptsz)
{
    struct sim_event *ev = ev_of(e);
    if (!ev)
        return CUDA_ERROR_INVALID_HANDLE;
    LOCKED_RESOLVE(s, h, ptsz);
    if (ev->cap && ev->cap->graph) { /* graph == NULL: that capture has ended */
        if (!s->cap) {
            s->cap = ev->cap;
            s->ndeps = 0;
        }
        if (s->cap == ev->cap) {
            for (size_t i = 0; i < ev->ndeps; i++) {
                size_t j;
                for (j = 0; j < s->ndeps && s->deps[j] != ev->deps[i]; j++) {
                }
                if (j == s->ndeps) {
                    s->deps = sim_grow(s->deps, &s->capdeps, s->ndeps + 1, sizeof *s->deps);
                    s->deps[s->ndeps++] = ev->deps[i];
                }
            }
        }
    } else if (ev->recorded && !s->cap) {
        tl_commit(s, ev->time);
    }
    pthread_mutex_unlock(&sim_lock);
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuStreamWaitEvent(CUstream h, CUevent e, unsigned int flags)
{
    (void)flags;
    return stream_wait_event(h, e, 0);
}

SIM_EXPORT CUresult cuStreamWaitEvent_ptsz(CUstream h, CUevent e, unsigned int flags)
{
    (void)flags;
    return stream_wait_event(h, e, 1);
}

#define STREAM_GETTER(fn, type, expr)                                                             \
    static CUresult fn##_impl(CUstream h, type *out, int ptsz)                                    \
    {                                                                                             \
        if (!out)                                                                                 \
            return CUDA_ERROR_INVALID_VALUE;                                                      \
        LOCKED_RESOLVE(s, h, ptsz);                                                               \
        *out = (expr);                                                                            \
        pthread_mutex_unlock(&sim_lock);                                                          \
        return CUDA_SUCCESS;                                                                      \
    }                                                                                             \
    SIM_EXPORT CUresult fn(CUstream h, type *out) { return fn##_impl(h, out, 0); }                 \
    SIM_EXPORT CUresult fn##_ptsz(CUstream h, type *out) { return fn##_impl(h, out, 1); }

STREAM_GETTER(cuStreamGetFlags, unsigned int, s->flags)
STREAM_GETTER(cuStreamGetPriority, int, s->priority)
STREAM_GETTER(cuStreamGetId, unsigned long long, (unsigned long long)s->id)

/* ---- events ---- */

SIM_EXPORT CUresult cuEventCreate(CUevent *phEvent, unsigned int Flags)
{
    if (!phEvent)
        return CUDA_ERROR_INVALID_VALUE;
    struct sim_event *ev = calloc(1, sizeof *ev);
    if (!ev)
        return CUDA_ERROR_OUT_OF_MEMORY;
    ev->magic = MAGIC_EVENT;
    ev->flags = Flags;
    *phEvent = (CUevent)ev;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuEventDestroy_v2(CUevent e)
{
    struct sim_event *ev = ev_of(e);
    if (!ev)
        return CUDA_ERROR_INVALID_HANDLE;
    pthread_mutex_lock(&sim_lock);
    ev->magic = 0;
    free(ev->deps);
    free(ev);
    pthread_mutex_unlock(&sim_lock);
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuEventDestroy(CUevent e) { return cuEventDestroy_v2(e); }

/* A record is a zero-length op: its time is when the stream reaches it, i.e. the start time a
 * kernel launched now would get. */
static CUresult event_record(CUevent e, CUstream h, int ptsz)
{
    struct sim_event *ev = ev_of(e);
    if (!ev)
        return CUDA_ERROR_INVALID_HANDLE;
    LOCKED_RESOLVE(s, h, ptsz);
    if (s->cap) {
        ev->cap = s->cap;
        free(ev->deps);
        ev->deps = NULL;
        ev->ndeps = s->ndeps;
        if (s->ndeps) {
            ev->deps = malloc(s->ndeps * sizeof *ev->deps);
            if (!ev->deps)
                abort();
            memcpy(ev->deps, s->deps, s->ndeps * sizeof *ev->deps);
        }
    } else {
        ev->cap = NULL;
        ev->time = tl_ready(s, sim_now() + cost_latency());
        ev->recorded = 1;
        tl_commit(s, ev->time);
    }
    pthread_mutex_unlock(&sim_lock);
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuEventRecord(CUevent e, CUstream h) { return event_record(e, h, 0); }
SIM_EXPORT CUresult cuEventRecord_ptsz(CUevent e, CUstream h) { return event_record(e, h, 1); }

SIM_EXPORT CUresult cuEventRecordWithFlags(CUevent e, CUstream h, unsigned int flags)
{
    (void)flags;
    return event_record(e, h, 0);
}

SIM_EXPORT CUresult cuEventRecordWithFlags_ptsz(CUevent e, CUstream h, unsigned int flags)
{
    (void)flags;
    return event_record(e, h, 1);
}

static int event_time(struct sim_event *ev, simtime_t *t)
{
    pthread_mutex_lock(&sim_lock);
    int rec = ev->recorded;
    *t = ev->time;
    pthread_mutex_unlock(&sim_lock);
    return rec;
}

SIM_EXPORT CUresult cuEventQuery(CUevent e)
{
    struct sim_event *ev = ev_of(e);
    if (!ev)
        return CUDA_ERROR_INVALID_HANDLE;
    simtime_t t;
    if (!event_time(ev, &t) || sim_zero())
        return CUDA_SUCCESS;
    return sim_now() >= t ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

SIM_EXPORT CUresult cuEventSynchronize(CUevent e)
{
    struct sim_event *ev = ev_of(e);
    if (!ev)
        return CUDA_ERROR_INVALID_HANDLE;
    simtime_t t;
    if (event_time(ev, &t)) {
        tlog_flush();
        sim_wait_until(t);
    }
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuEventElapsedTime_v2(float *pMilliseconds, CUevent hStart, CUevent hEnd)
{
    struct sim_event *a = ev_of(hStart), *b = ev_of(hEnd);
    if (!pMilliseconds)
        return CUDA_ERROR_INVALID_VALUE;
    if (!a || !b)
        return CUDA_ERROR_INVALID_HANDLE;
    if ((a->flags | b->flags) & CU_EVENT_DISABLE_TIMING)
        return CUDA_ERROR_INVALID_HANDLE;
    simtime_t ta, tb;
    if (!event_time(a, &ta) || !event_time(b, &tb))
        return CUDA_ERROR_INVALID_HANDLE;
    if (!sim_zero() && sim_now() < (ta > tb ? ta : tb))
        return CUDA_ERROR_NOT_READY;
    *pMilliseconds = (float)((double)(tb - ta) / 1e6);
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuEventElapsedTime(float *pMilliseconds, CUevent hStart, CUevent hEnd)
{
    return cuEventElapsedTime_v2(pMilliseconds, hStart, hEnd);
}
