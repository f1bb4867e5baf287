/* The step dependency model (decoder/model/critpath.c) on hand-made records whose replay is
 * worked out by hand: unchanged it gives back the observed ends exactly; a kernel class faster
 * moves a GPU-bound step by its saving and no more; a slower host moves the steps it bounds; a
 * graph replay follows its nodes' dependencies; a missing GPU record is said, not guessed. */
#include <criterion/criterion.h>
#include <string.h>

#include "capture/reader.h"
#include "model/critpath.h"

static struct tkp_crit *c;

static void add(struct tkp_record *r)
{
    r->pid = 1, r->tid = 100;
    cr_assert_eq(tkp_crit_add(c, r), 0);
}

static void launch(uint64_t seg, uint64_t ns, uint64_t name)
{
    struct tkp_record r;
    memset(&r, 0, sizeof(r));
    r.type = TKP_REC_LAUNCH, r.step = seg, r.host_ns = ns;
    r.launch.stream = 7, r.launch.name_id = name;
    r.launch.name = name == 'n' ? "norm" : name == 'l' ? "lm_head" : "other";
    add(&r);
}

static void sync_(uint64_t seg, uint64_t ns, uint64_t wait)
{
    struct tkp_record r;
    memset(&r, 0, sizeof(r));
    r.type = TKP_REC_SYNC, r.step = seg, r.host_ns = ns;
    r.sync.kind = TKP_SYNC_STREAM, r.sync.handle = 7, r.sync.wait_ns = wait;
    add(&r);
}

static void step(uint64_t seg, uint64_t end)
{
    struct tkp_record r;
    memset(&r, 0, sizeof(r));
    r.type = TKP_REC_STEP, r.step = seg;
    r.step_rec.kind = TKP_STEP_TOKEN, r.step_rec.end_ns = end;
    add(&r);
}

static void gpu(uint64_t seg, uint32_t join, uint32_t index, uint64_t node, const char *name,
                uint64_t start, uint64_t end)
{
    struct tkp_record r;
    memset(&r, 0, sizeof(r));
    r.type = TKP_REC_GPU_KERNEL, r.step = seg;
    r.gpu.join = join, r.gpu.index = index, r.gpu.node = node;
    r.gpu.name = name, r.gpu.name_id = name[0];
    r.gpu.start_ns = start, r.gpu.end_ns = end;
    add(&r);
}

static double by_name(void *arg, const char *name)
{
    const char *want = arg;
    return !strcmp(name, want) ? 0.5 : 1;
}

/* A model replaying ch, told that GPU tracing is on. */
static void start(struct tkp_crit_change *ch)
{
    cr_assert_eq(tkp_crit_new(ch, &c), 0);
    struct tkp_record info;
    memset(&info, 0, sizeof(info));
    info.type = TKP_REC_GPU_INFO, info.gpu_info.status = TKP_GPU_ON;
    add(&info);
}

/* The replay finished: its steps, `want` of them. */
static const struct tkp_crit_step *finish(size_t want)
{
    cr_assert_eq(tkp_crit_finish(c), 0);
    size_t n;
    const struct tkp_crit_step *s = tkp_crit_steps(c, &n);
    cr_assert_eq(n, want);
    return s;
}

/* Two steps on one stream, each: attn launched, gemm launched, a stream sync that waits `wait`,
 * the STEP record at its return; the kernels' GPU times. */
struct fixture {
    uint64_t a, g, sync, wait, end, a0, a1, g0, g1;
};
/* GPU-bound: attn (10 us) then gemm (4 us), launched 0.5 us apart, a stream sync 0.5 us later that
 * wakes 0.3 us after the gemm ends; latency 2 us. */
static const struct fixture gpu_bound[2] = {
    {1000, 1500, 2000, 15300, 17300, 3000, 13000, 13000, 17000},
    {17800, 18300, 18800, 15300, 34100, 19800, 29800, 29800, 33800}};
/* Host-bound: attn and gemm (GPU 0.1 us each, latency 2 us) launched 0.5 us apart (the launch
 * call's cost: the smallest gap before a launch), 2 us of host code before the sync (2.5 us after
 * gemm), which wakes 0.1 us later; step 2's attn 2 us after step 1's sync returns. */
static const struct fixture host_bound[2] = {
    {1000, 1500, 4000, 100, 4100, 3000, 3100, 3500, 3600},
    {6100, 6600, 9100, 100, 9200, 8100, 8200, 8600, 8700}};

/* The two steps of f replayed under ch (drop_gemm: step 2's gemm without its GPU record). */
static const struct tkp_crit_step *two_steps(struct tkp_crit_change *ch, const struct fixture *f,
                                             int drop_gemm)
{
    start(ch);
    for (uint64_t k = 0; k < 2; k++)
        launch(k + 1, f[k].a, 'a'), launch(k + 1, f[k].g, 'g'), sync_(k + 1, f[k].sync, f[k].wait),
            step(k + 1, f[k].end);
    for (uint64_t k = 0; k < 2; k++) {
        gpu(k + 1, TKP_JOIN_LAUNCH, 0, UINT64_MAX, "attn", f[k].a0, f[k].a1);
        if (!(drop_gemm && k)) gpu(k + 1, TKP_JOIN_LAUNCH, 1, UINT64_MAX, "gemm", f[k].g0, f[k].g1);
    }
    return finish(2);
}

/* A fixture (gpu_bound, host_bound) under one change, and what the replay
 * must give, worked out by hand. --host and --launch-ns are separate knobs: the host's code x F,
 * each launch call's own cost (the smallest gap before a launch: 500 in both) kept, or set. */
static const struct two_case {
    const char *what;
    int host_bound;      /* host_bound, else gpu_bound */
    double host;         /* ch.host */
    int64_t launch_ns;   /* ch.launch_ns (-1: as captured) */
    char *faster;        /* a kernel name x0.5 (NULL: none) */
    int drop_gemm;       /* step 2's gemm without its GPU record */
    uint64_t end1, end2; /* predicted ends (end2 0: step 2 says TKP_CRIT_NO_GPU) */
    uint64_t gpu2;       /* step 2's predicted GPU time (observed: 14000; host_bound 200) */
    uint64_t host2;      /* step 2's predicted host time (observed: 1500; host_bound 5000) */
} two_cases[] = {
    /* the observed ends */
    {"unchanged", 0, 1, -1, NULL, 0, 17300, 34100, 14000, 1500},
    /* step 1: attn 3000..8000, gemm ..12000, wakes 12300; step 2: launched 500 later, attn
     * 14800..19800, gemm ..23800, wakes 24100 */
    {"attention twice as fast", 0, 1, -1, "attn", 0, 12300, 24100, 9000, 1500},
    /* every gap before a launch here is the launch call's own cost (500, the smallest): a slower
     * host keeps it; only the 500 before each sync becomes 1000, hidden by the GPU */
    {"slower host", 0, 2, -1, NULL, 0, 17300, 34100, 14000, 2000},
    /* the smallest gap before a launch is 500 (step 1's gemm): each launch's 500 becomes 100;
     * step 1 is GPU-bound (same end); step 2's attn is called at 17400, starts 19400, the gemm
     * ends 33400, the sync wakes at 33700 */
    {"cheaper launches", 0, 1, 100, NULL, 0, 17300, 33700, 14000, 700},
    /* a missing GPU record is said, not guessed */
    {"step 2's gemm not recorded", 0, 1, -1, NULL, 1, 17300, 0, 0, 0},
    {"host-bound, unchanged", 1, 1, -1, NULL, 0, 4100, 9200, 200, 5000},
    /* g's gap is the call (500, kept); the sync's 2500 -> 1250: called 2750, GPU unchanged to
     * 3600, wakes 3700; step 2: a's 2000 = 500 call + 1500 code -> 1250: 4950, g 5450, sync
     * 6700, GPU 6950..7050, 7450..7550, wakes 7650 (the call scaled too would give 6900) */
    {"host x0.5, launch calls kept", 1, 0.5, -1, NULL, 0, 3700, 7650, 200, 3000},
    /* each call 100: g at 1100, GPU to 3200, the sync at 3600 wakes 3700; step 2 a at 5300,
     * g 5400, sync 7900 (GPU 7400..7500) wakes 8000 */
    {"launch calls 100 ns", 1, 1, 100, NULL, 0, 3700, 8000, 200, 4200},
    /* both: g 1100, sync 2350, GPU to 3200, wakes 3300; step 2: a 3300 + 750 + 100 = 4150, g
     * 4250, sync 5500, GPU 6150..6250, 6250..6350, wakes 6450 */
    {"host x0.5 and launch calls 100 ns", 1, 0.5, 100, NULL, 0, 3300, 6450, 200, 2200},
};

Test(critpath, each_change)
{
    for (size_t k = 0; k < sizeof(two_cases) / sizeof(two_cases[0]); k++) {
        const struct two_case *t = &two_cases[k];
        struct tkp_crit_change ch;
        tkp_crit_change_init(&ch);
        ch.host = t->host, ch.launch_ns = t->launch_ns;
        if (t->faster) ch.scale = by_name, ch.scale_arg = t->faster;
        const struct tkp_crit_step *s =
            two_steps(&ch, t->host_bound ? host_bound : gpu_bound, t->drop_gemm);
        cr_assert_eq(tkp_crit_latency_ns(c), 2000, "%s", t->what);
        cr_assert_eq(tkp_crit_launch_cost_ns(c), 500, "%s", t->what);
        cr_assert_eq(s[0].why, 0, "%s", t->what);
        cr_assert_eq(s[0].pred_end, t->end1, "%s: step 1 ends at %llu", t->what,
                     (unsigned long long)s[0].pred_end);
        if (!t->end2) {
            cr_assert(s[1].why & TKP_CRIT_NO_GPU, "%s", t->what);
        } else {
            cr_assert_eq(s[1].why, 0, "%s", t->what);
            cr_assert_eq(s[1].pred_end, t->end2, "%s: step 2 ends at %llu", t->what,
                         (unsigned long long)s[1].pred_end);
            cr_assert_eq(s[1].pred_gpu, t->gpu2, "%s", t->what);
            cr_assert_eq(s[1].obs_gpu, t->host_bound ? 200 : 14000, "%s", t->what);
            cr_assert_eq(s[1].obs_host, t->host_bound ? 5000 : 1500, "%s", t->what);
            cr_assert_eq(s[1].pred_host, t->host2, "%s: step 2's host %llu", t->what,
                         (unsigned long long)s[1].pred_host);
        }
        tkp_crit_free(c);
    }
}

/* A graph A -> {B, C} -> D: B 5 us and C 2 us in parallel; B x0.5 leaves B on the path (2.5 us),
 * the replay ends 2.5 us sooner. */
Test(critpath, graph_replay_follows_dependencies)
{
    struct tkp_crit_change ch;
    tkp_crit_change_init(&ch);
    ch.scale = by_name, ch.scale_arg = "B";
    cr_assert_eq(tkp_crit_new(&ch, &c), 0);
    struct tkp_record r;
    memset(&r, 0, sizeof(r));
    r.type = TKP_REC_GPU_INFO, r.gpu_info.status = TKP_GPU_ON;
    add(&r);
    uint64_t da[] = {10}, dbc[] = {10}, dd[] = {11, 12};
    struct tkp_graph_node nodes[4] = {
        {.node = 13, .type = 0, .ndeps = 2, .deps = dd}, /* D first: the order must be topological */
        {.node = 10, .type = 0},
        {.node = 11, .type = 0, .ndeps = 1, .deps = da},
        {.node = 12, .type = 0, .ndeps = 1, .deps = dbc},
    };
    memset(&r, 0, sizeof(r));
    r.type = TKP_REC_GRAPH, r.graph.graph = 5, r.graph.nnodes = 4, r.graph.nodes = nodes;
    add(&r);
    memset(&r, 0, sizeof(r));
    r.type = TKP_REC_GRAPH_LAUNCH, r.step = 1, r.host_ns = 1000;
    r.graph_launch.graph = 5, r.graph_launch.stream = 7;
    add(&r);
    sync_(1, 1500, 9500); /* returns at 11000: D ends at 11000 */
    step(1, 11000);
    gpu(1, TKP_JOIN_GRAPH_LAUNCH, 0, 10, "A", 3000, 4000);
    gpu(1, TKP_JOIN_GRAPH_LAUNCH, 0, 11, "B", 4000, 9000);
    gpu(1, TKP_JOIN_GRAPH_LAUNCH, 0, 12, "C", 4000, 6000);
    gpu(1, TKP_JOIN_GRAPH_LAUNCH, 0, 13, "D", 9000, 11000);
    cr_assert_eq(tkp_crit_finish(c), 0);
    size_t n;
    const struct tkp_crit_step *s = tkp_crit_steps(c, &n);
    cr_assert_eq(n, 1);
    cr_assert_eq(s[0].why, 0);
    cr_assert_eq(s[0].pred_end, 11000 - 2500, "%llu", (unsigned long long)s[0].pred_end);
    tkp_crit_free(c);
}

static int is_norm(void *arg, const char *name)
{
    (void)arg;
    return !strcmp(name, "norm");
}

/* Launch-bound steps: fwd, norm, lm_head launched 1 us apart (GPU 0.1 us each, latency 2 us),
 * a sync 0.5 us after the last launch waking 0.3 us after lm_head ends; the second step 10 us
 * after the first. Graphs ending at the norm (300 ns a replay): fwd and norm back to back from
 * the replay, lm_head eager right after it (the 1 us gap after norm's launch is norm's own call,
 * the smallest gap before a launch, which the replay's cost stands for). Worked by hand: step 1
 * fwd 3000..3100, norm ..3200, lm_head called 1300, runs 3300..3400, the sync (called 1800)
 * wakes 3700; step 2 called 5600 later at 9300: 11300..11400, ..11500, lm_head called 9600 runs
 * 11600..11700, wakes 12000. */
static void launch_bound(struct tkp_crit_change *ch)
{
    start(ch);
    for (uint64_t k = 0; k < 2; k++) {
        uint64_t o = 10000 * k, seg = k + 1;
        launch(seg, o + 1000, 'f'), launch(seg, o + 2000, 'n'), launch(seg, o + 3000, 'l');
        sync_(seg, o + 3500, 1900), step(seg, o + 5400);
        gpu(seg, TKP_JOIN_LAUNCH, 0, UINT64_MAX, "fwd", o + 3000, o + 3100);
        gpu(seg, TKP_JOIN_LAUNCH, 1, UINT64_MAX, "norm", o + 4000, o + 4100);
        gpu(seg, TKP_JOIN_LAUNCH, 2, UINT64_MAX, "lm_head", o + 5000, o + 5100);
    }
    cr_assert_eq(tkp_crit_finish(c), 0);
}

/* The graph ends after the norm: both steps as worked above, each replayed with an eager tail. */
static void expect_norm_graph(void)
{
    size_t n;
    const struct tkp_crit_step *s = tkp_crit_steps(c, &n);
    cr_assert_eq(n, 2);
    cr_assert_eq(s[0].pred_end, 3700, "%llu", (unsigned long long)s[0].pred_end);
    cr_assert_eq(s[1].pred_end, 12000, "%llu", (unsigned long long)s[1].pred_end);
    size_t graphed;
    cr_assert_eq(tkp_crit_graph_whole(c, &graphed), 0, "every step has its graph's end");
    cr_assert_eq(graphed, 2);
}

Test(critpath, graphs_end_at_the_last_norm)
{
    struct tkp_crit_change ch;
    tkp_crit_change_init(&ch);
    ch.graphs = 1, ch.graph_ns = 300, ch.graph_end = is_norm;
    launch_bound(&ch);
    expect_norm_graph();
    int measured;
    cr_assert_eq(tkp_crit_graph_ns(c, &measured), 300);
    cr_assert_eq(measured, 0);
    tkp_crit_free(c);
}

static int is_lm_head_or_norm(void *arg, const char *name)
{
    (void)arg;
    return !strcmp(name, "lm_head") || !strcmp(name, "norm");
}

static int is_lm_head(void *arg, const char *name)
{
    (void)arg;
    return !strcmp(name, "lm_head");
}

/* graph_end_before (--graphs-end before:gemm): the graph ends just before the step's last run of
 * matching launches. Before lm_head: the same replay as at the last norm (3700, 12000). */
Test(critpath, graphs_end_before_the_last_match)
{
    struct tkp_crit_change ch;
    tkp_crit_change_init(&ch);
    ch.graphs = 1, ch.graph_ns = 300, ch.graph_end = is_lm_head, ch.graph_end_before = 1;
    launch_bound(&ch);
    expect_norm_graph();
    tkp_crit_free(c);
}

/* ... a run of matches (norm, lm_head: split-K's two launches) is one: the graph holds fwd
 * only, norm and lm_head eager. By hand: the replay at 1000 (host back at 1300), fwd
 * 3000..3100; norm's gap (1000: fwd's own call, in the replay) gone: called 1300, runs 3300..
 * 3400; lm_head called 2300, 4300..4400; the sync (2800) wakes 4700. */
Test(critpath, graphs_end_before_a_run_of_matches)
{
    struct tkp_crit_change ch;
    tkp_crit_change_init(&ch);
    ch.graphs = 1, ch.graph_ns = 300, ch.graph_end = is_lm_head_or_norm, ch.graph_end_before = 1;
    launch_bound(&ch);
    size_t n;
    const struct tkp_crit_step *s = tkp_crit_steps(c, &n);
    cr_assert_eq(s[0].pred_end, 4700, "%llu", (unsigned long long)s[0].pred_end);
    tkp_crit_free(c);
}

static int is_nothing(void *arg, const char *name)
{
    (void)arg, (void)name;
    return 0;
}

/* A graph_end no launch matches: every step replayed whole, and counted (whatif says so). */
Test(critpath, graphs_end_that_matches_nothing_is_counted)
{
    struct tkp_crit_change ch;
    tkp_crit_change_init(&ch);
    ch.graphs = 1, ch.graph_ns = 300, ch.graph_end = is_nothing;
    launch_bound(&ch);
    size_t graphed;
    cr_assert_eq(tkp_crit_graph_whole(c, &graphed), 2);
    cr_assert_eq(graphed, 2);
    tkp_crit_free(c);
}

/* The same with every launch graphed (no graph_end): lm_head from the replay too, 3200..3300,
 * step 1 wakes 3600; and the replay's cost, none given and no graph launch: the default. */
Test(critpath, graphs_whole_step_and_default_cost)
{
    struct tkp_crit_change ch;
    tkp_crit_change_init(&ch);
    ch.graphs = 1;
    launch_bound(&ch);
    size_t n;
    const struct tkp_crit_step *s = tkp_crit_steps(c, &n);
    int measured;
    cr_assert_eq(tkp_crit_graph_ns(c, &measured), TKP_CRIT_GRAPH_NS);
    cr_assert_eq(measured, 0);
    /* fwd from 1000 (replay cost 10000: the host is back at 11000), norm, lm_head back to back
     * 3000..3300; the sync's 500 after lm_head's launch are lm_head's own call (below the
     * smallest gap before a launch), in the replay's cost: called at 11000, wakes 11300 */
    cr_assert_eq(s[0].pred_end, 11300, "%llu", (unsigned long long)s[0].pred_end);
    tkp_crit_free(c);
}

/* The replay's cost measured: a graph launch followed 700 ns later by a launch. */
Test(critpath, graph_cost_measured_from_graph_launches)
{
    struct tkp_crit_change ch;
    tkp_crit_change_init(&ch);
    ch.graphs = 1;
    cr_assert_eq(tkp_crit_new(&ch, &c), 0);
    struct tkp_record r;
    memset(&r, 0, sizeof(r));
    r.type = TKP_REC_GRAPH_LAUNCH, r.step = 1, r.host_ns = 1000;
    r.graph_launch.graph = TKP_GRAPH_UNKNOWN, r.graph_launch.stream = 7;
    add(&r);
    launch(1, 1700, 'l'), launch(1, 2900, 'l'), step(1, 5000);
    cr_assert_eq(tkp_crit_finish(c), 0);
    int measured;
    uint64_t g = tkp_crit_graph_ns(c, &measured);
    cr_assert_eq(g, 700, "%llu", (unsigned long long)g);
    cr_assert_eq(measured, 1);
    tkp_crit_free(c);
}
