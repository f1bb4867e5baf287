/* tokprof decoder: the step dependency model — what made each step end when it did, replayed
 * with changed costs ("what if attention were twice as fast", "what if the host were faster").
 *
 *     struct tkp_crit *c;
 *     tkp_crit_new(&change, &c);
 *     while (tkp_reader_next(r, &rec) == 1)
 *         if ((err = tkp_crit_add(c, &rec))) break;
 *     err = tkp_crit_finish(c);
 *     ... tkp_crit_steps(c, &n) ...
 *     tkp_crit_free(c);
 *
 * The model, per host thread, in the order of its records:
 *   - host segments: the time between one API call's return and the next call (a launch
 *     returns when it is called; a SYNC when its wait_ns has passed): scaled by change.host,
 *     but for a launch's own call cost in the gap before it (the smallest such gap seen), which
 *     stays or becomes change.launch_ns;
 *   - launches: on their stream (the raw handle), in stream order: a kernel starts at
 *     max(host call + latency, the stream's tail) and lasts its GPU duration (its GPU_KERNEL
 *     record, joined by thread, step, join and index) x its name's factor;
 *   - EVENT_RECORD marks the stream's tail (max(call + latency, tail): the simulator's and the
 *     driver's rule), STREAM_WAIT raises a stream's tail to an event's; SYNC (stream, event,
 *     device, blocking copy) makes the host wait for a tail; copies are ops on their stream;
 *   - graph replays as their recorded nodes (GRAPH: nodes and dependencies): each node at
 *     max(the replay's start, its dependencies' ends).
 * Every wait keeps its unexplained part: a kernel's start minus what the model says it could
 * start at (the launch latency's jitter, a legacy-stream rule), a sync's return minus what it
 * waited for (the wake-up): those stay constant under a change, so the unchanged replay gives
 * back the observed times exactly, and a change moves only what it changes. The latency is
 * the smallest (GPU start - launch call) seen so far.
 *
 * What it does not predict, said per step (flags below), never guessed: a launch, copy or
 * graph node without its GPU record (GPU tracing off, outside a window, dropped) makes the
 * step whose end waits on it unpredictable; so does a wait on an event never recorded.
 *
 * Memory: the records between a launch and its GPU record (GPU records come chunks later),
 * the graph topologies, streams and events, and O(steps) for the step table. */
#ifndef TKP_CRITPATH_H
#define TKP_CRITPATH_H

#include <stddef.h>
#include <stdint.h>

struct tkp_record;

/* The change to replay. tkp_crit_change_init() gives "no change". */
struct tkp_crit_change {
    double host;       /* host segments x host (1: unchanged); a launch's own cost (below) is
                        * not the host's code and stays */
    int64_t launch_ns; /* < 0: unchanged; else each launch's host cost, the smallest gap seen
                        * before a launch on its thread, is replaced by launch_ns */
    int graphs;        /* each step's eager launches as one graph replay: one host cost of
                        * graph_ns at its first launch, none at the others, kernels back to back */
    uint64_t graph_ns; /* the host cost of a replay for graphs; 0: measured (the median gap
                        * after a GRAPH_LAUNCH so far), TKP_CRIT_GRAPH_NS until one is seen */
    /* graphs: a kernel name that ends a step's captured part (1) or not (0), asked once per
     * distinct name id: the replay holds the step's launches up to its last matching launch,
     * later ones stay eager (a server captures the forward, not lm_head and sampling); a step
     * with no match is replayed whole. NULL: every launch of the step. */
    int (*graph_end)(void *arg, const char *name);
    /* graphs: the replay ends just before the step's last run of consecutive graph_end launches
     * (before:gemm: before lm_head, whose split-K GEMM is two launches), not at its last one */
    int graph_end_before;
    /* a kernel name's GPU duration factor (1 unchanged), asked once per distinct name id; NULL:
     * every factor 1 */
    double (*scale)(void *arg, const char *name);
    void *scale_arg;
};

/* cudaGraphLaunch's host cost when a capture has no graph launch to measure (a replay of a few hundred
 * nodes on a current driver and CPU: ~10 us) */
#define TKP_CRIT_GRAPH_NS 10000u

/* Why a step's prediction is missing (bits). */
enum {
    TKP_CRIT_NO_GPU = 1,  /* a launch, copy or graph node of its critical path has no GPU record */
    TKP_CRIT_NO_EVENT = 2, /* a wait on an event never recorded */
    TKP_CRIT_OPEN = 4,    /* no STEP record (a cut capture) */
};

struct tkp_crit_step {
    uint32_t thread;
    uint64_t seg;
    int token;                    /* a token step (STEP kind 0) */
    uint64_t obs_end, pred_end;   /* when the host saw the step complete: observed, predicted */
    /* where the host's time went between records tagged with this step: running (host
     * segments) and blocked in syncs, observed and predicted */
    uint64_t obs_host, pred_host, obs_wait, pred_wait;
    uint64_t obs_gpu, pred_gpu;   /* GPU time of its kernels and copies (sum of durations) */
    uint32_t why;                 /* 0: predicted; else TKP_CRIT_* bits */
    int graph; /* graphs: 0 no eager launch replayed as a graph, 1 up to its last graph_end
                * launch (or every launch: no graph_end), 2 no graph_end launch: whole */
};

struct tkp_crit;

void tkp_crit_change_init(struct tkp_crit_change *ch);
/* A model replaying change ch (copied). 0 or TKP_ERR_NOMEM. */
int tkp_crit_new(const struct tkp_crit_change *ch, struct tkp_crit **out);
/* Feeds one record (any type; the reader's order). 0 or TKP_ERR_NOMEM. */
int tkp_crit_add(struct tkp_crit *c, const struct tkp_record *r);
/* Replays what is left (GPU records that never came are missing now). 0 or TKP_ERR_NOMEM. */
int tkp_crit_finish(struct tkp_crit *c);
/* The steps, in the order their STEP records came (per thread: segment order); valid until
 * tkp_crit_free. */
const struct tkp_crit_step *tkp_crit_steps(const struct tkp_crit *c, size_t *n);
/* The token intervals (consecutive token steps of a thread, both ends seen) both of whose ends
 * were predicted: *obs and *pred get n values each (ns, malloc'd, the caller frees; paired, in
 * step order), *skipped the intervals left out. 0 or TKP_ERR_NOMEM. After tkp_crit_finish. */
int tkp_crit_intervals(const struct tkp_crit *c, uint64_t **obs, uint64_t **pred, size_t *n,
                       size_t *skipped);
/* The launch latency the model used (ns), and the smallest host gap before a launch. */
uint64_t tkp_crit_latency_ns(const struct tkp_crit *c);
uint64_t tkp_crit_launch_cost_ns(const struct tkp_crit *c);
/* graphs: the per-replay host cost (given, else the median gap after the capture's graph
 * launches, else TKP_CRIT_GRAPH_NS) and whether it was measured from the capture. After finish. */
uint64_t tkp_crit_graph_ns(struct tkp_crit *c, int *measured);
/* graphs with graph_end: how many of the token steps replayed as a graph (*graphed) had no
 * launch graph_end matched, and were replayed whole. After finish. */
size_t tkp_crit_graph_whole(const struct tkp_crit *c, size_t *graphed);
void tkp_crit_free(struct tkp_crit *c); /* accepts NULL */

#endif
