/* Sampled host call stacks at launch sites: decision, unwinding, interning, MODULE and STACK
 * records (stacks.h; docs/FORMAT.md "Stacks").
 *
 * The unwinder. libunwind's unw_backtrace() (the local-only fast path, with its per-thread cache
 * of frame layouts) takes ~170 ns for 15 frames once warm, glibc's backtrace() (libgcc_s's
 * DWARF unwinder, no cache) ~2.2 µs. Debian's libunwind.a is not position-independent, so it
 * cannot be linked into this shared object; libunwind.so.8 is dlopen'ed (RTLD_LOCAL: its
 * _Unwind_* and backtrace exports stay out of the program's scope) at capture start, and only
 * when TOKPROF_STACKS is on, so the shim still NEEDs only glibc. Where libunwind.so.8 is absent
 * the stacks come from glibc's backtrace(), called once at start so that its dlopen of libgcc_s
 * happens there and not on a launch (one warning line says so). Either unwinder allocates on its
 * first use in each thread (libunwind mmaps its per-thread cache; both walk dl_iterate_phdr,
 * which takes the loader's lock, for a pc they have not seen): that is the cost of a sampled
 * launch, never of an unsampled one.
 *
 * Interning. A sampled launch hashes its frames and looks them up in a fixed, mmap'ed, lock-free
 * open-addressing table; a new stack takes the next id (fetch-add), writes its frames into its
 * own arena slot and publishes the slot's key and id (release). Two threads inserting the same
 * new stack at once may get two ids for it (the decoder merges by content). Past TKP_STACKS_MAX
 * distinct stacks, new ones are not recorded (counted, logged at exit).
 *
 * Modules. A process-wide list (path, build id, load bias, extent) built with dl_iterate_phdr at
 * capture start and rebuilt by the writer when a stack has a pc no listed module covers (a
 * library loaded later). The writer emits a MODULE record in a chunk before the first STACK of
 * that chunk that has a pc in it, so chunks stay self-contained. */
#include "record/stacks.h"

#include <dlfcn.h>
#include <elf.h>
#include <execinfo.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/config.h"
#include "core/grow.h"
#include "core/log.h"
#include "core/real.h"
#include "tokprof/format.h"

#define TKP_STACKS_MAX 16384 /* distinct stacks per process */
#define STACK_SLOTS 32768    /* interning table, a power of two above twice the maximum */
#define SITE_SLOTS 8192      /* first:K sites */
#define SKIP_MAX 8           /* frames of our own above the hook's caller */

int tkp_stacks_mode;
uint32_t tkp_stacks_n;
static uint32_t stacks_k;
static int force_backtrace;

typedef int (*backtrace_fn)(void **, int);
static backtrace_fn unwind; /* unw_backtrace or glibc backtrace */
static const char *unwinder = "none";
static uintptr_t shim_lo, shim_hi; /* our own text: frames skipped */

struct slot {
    _Atomic uint64_t key; /* hash | 1, 0 free */
    _Atomic uint32_t id;
    uint32_t pad;
};
struct site {
    _Atomic uint64_t key;
    _Atomic uint32_t count;
    uint32_t pad;
};
static struct {
    struct slot *slots;
    struct site *sites;
    uint64_t (*frames)[TKP_STACK_DEPTH]; /* [TKP_STACKS_MAX + 1], by id */
    uint8_t *nframes;
    _Atomic uint32_t next;
    _Atomic uint64_t full, sites_full, failed;
} T;

/* ---- configuration ------------------------------------------------------------------------- */

void tkp_stacks_config(void)
{
    tkp_stacks_mode = tkp_cfg.stacks_mode;
    if (tkp_stacks_mode == TKP_STACKS_FIRST) stacks_k = tkp_cfg.stacks_every;
    if (tkp_stacks_mode == TKP_STACKS_SAMPLE) tkp_stacks_n = tkp_cfg.stacks_every;
    force_backtrace = tkp_cfg.stacks_unwinder == TKP_UNWINDER_BACKTRACE;
}

const char *tkp_stacks_desc(void)
{
    static char buf[64];
    if (tkp_stacks_mode == TKP_STACKS_OFF) return "off";
    snprintf(buf, sizeof buf, "%s:%u %s", tkp_stacks_mode == TKP_STACKS_FIRST ? "first" : "sample",
             tkp_stacks_mode == TKP_STACKS_FIRST ? stacks_k : tkp_stacks_n, unwinder);
    return buf;
}

/* ---- modules -------------------------------------------------------------------------------- */

struct module {
    char *path;
    char build_id[41 * 2];
    uint64_t base, lo, hi; /* load bias; covered addresses [lo, hi) */
    uint32_t gen;          /* chunk seq + 1 when emitted in that chunk */
};
static struct module *mods;
static uint32_t nmods, mods_cap;

static void hexify(char *dst, size_t cap, const unsigned char *p, size_t n)
{
    static const char x[] = "0123456789abcdef";
    size_t i = 0;
    for (; i < n && 2 * i + 2 < cap; i++) dst[2 * i] = x[p[i] >> 4], dst[2 * i + 1] = x[p[i] & 15];
    dst[2 * i] = 0;
}

static void build_id(struct dl_phdr_info *info, char *out, size_t cap)
{
    out[0] = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_NOTE) continue;
        const unsigned char *p = (const unsigned char *)(info->dlpi_addr + ph->p_vaddr);
        const unsigned char *end = p + ph->p_memsz;
        while (p + sizeof(ElfW(Nhdr)) <= end) {
            const ElfW(Nhdr) *nh = (const ElfW(Nhdr) *)p;
            const unsigned char *name = p + sizeof *nh;
            const unsigned char *desc = name + ((nh->n_namesz + 3) & ~3u);
            if (desc + nh->n_descsz > end) break;
            if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 && !memcmp(name, "GNU", 4)) {
                hexify(out, cap, desc, nh->n_descsz);
                return;
            }
            p = desc + ((nh->n_descsz + 3) & ~3u);
        }
    }
}

static int add_module(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size, (void)arg;
    uint64_t lo = UINT64_MAX, hi = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD) continue;
        if (ph->p_vaddr < lo) lo = ph->p_vaddr;
        if (ph->p_vaddr + ph->p_memsz > hi) hi = ph->p_vaddr + ph->p_memsz;
    }
    if (hi <= lo) return 0;
    lo += info->dlpi_addr, hi += info->dlpi_addr;
    for (uint32_t i = 0; i < nmods; i++)
        if (mods[i].lo == lo && mods[i].hi == hi && mods[i].base == info->dlpi_addr) return 0;
    if (tkp_grow((void **)&mods, &mods_cap, nmods, sizeof *mods, 64)) return 1;
    char exe[4096];
    const char *path = info->dlpi_name;
    if (!path || !*path) { /* the main program */
        ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
        exe[n > 0 ? n : 0] = 0;
        path = exe;
    }
    struct module *m = &mods[nmods];
    memset(m, 0, sizeof *m);
    if (!(m->path = strdup(path))) return 1;
    m->base = info->dlpi_addr, m->lo = lo, m->hi = hi;
    build_id(info, m->build_id, sizeof m->build_id);
    nmods++;
    return 0;
}

/* The newest module covering pc (a library loaded where an unloaded one was), or -1. */
static int module_of(uint64_t pc)
{
    for (uint32_t i = nmods; i-- > 0;)
        if (pc >= mods[i].lo && pc < mods[i].hi) return (int)i;
    return -1;
}

/* ---- start ---------------------------------------------------------------------------------- */

static void *map(size_t n)
{
    void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

void tkp_stacks_start(void)
{
    if (tkp_stacks_mode == TKP_STACKS_OFF || unwind) return;
    if (!force_backtrace) {
        void *h = dlopen("libunwind.so.8", RTLD_NOW | RTLD_LOCAL);
        if (h) unwind = (backtrace_fn)tkp_real_dlsym(h, "unw_backtrace");
        if (unwind) unwinder = "libunwind";
        else
            tkp_warn("TOKPROF_STACKS: libunwind.so.8 not found; using glibc backtrace(), about "
                     "ten times slower per sampled launch");
    }
    if (!unwind) unwind = backtrace, unwinder = "backtrace";
    T.slots = map(STACK_SLOTS * sizeof *T.slots);
    T.sites = map(SITE_SLOTS * sizeof *T.sites);
    T.frames = map((TKP_STACKS_MAX + 1) * sizeof *T.frames);
    T.nframes = map(TKP_STACKS_MAX + 1);
    Dl_info di;
    if (!T.slots || !T.sites || !T.frames || !T.nframes ||
        !dladdr((void *)(uintptr_t)tkp_stacks_capture, &di)) {
        tkp_warn("TOKPROF_STACKS: cannot map its tables; stacks off");
        tkp_stacks_mode = TKP_STACKS_OFF;
        return;
    }
    dl_iterate_phdr(add_module, NULL);
    int self = module_of((uintptr_t)tkp_stacks_capture);
    if (self >= 0) shim_lo = mods[self].lo, shim_hi = mods[self].hi;
    void *warm[TKP_STACK_DEPTH];
    unwind(warm, TKP_STACK_DEPTH); /* libgcc_s loaded, libunwind's cache set up, here */
}


/* ---- launch path (sampled) ------------------------------------------------------------------ */

static inline uint64_t mix64(uint64_t h)
{
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    return h;
}

int tkp_stacks_site_first(uint64_t key, int via)
{
    uint64_t k = mix64(key ^ ((uint64_t)via << 56)) | 1;
    for (uint32_t i = 0; i < SITE_SLOTS; i++) {
        struct site *s = &T.sites[(k + i) & (SITE_SLOTS - 1)];
        uint64_t cur = atomic_load_explicit(&s->key, memory_order_relaxed);
        if (!cur) {
            if (atomic_compare_exchange_strong(&s->key, &cur, k)) cur = k;
        }
        if (cur != k) continue;
        /* a plain load first: past K (the steady state) the line stays shared between cores */
        if (atomic_load_explicit(&s->count, memory_order_relaxed) >= stacks_k) return 0;
        return atomic_fetch_add_explicit(&s->count, 1, memory_order_relaxed) < stacks_k;
    }
    atomic_fetch_add_explicit(&T.sites_full, 1, memory_order_relaxed);
    return 0;
}

static uint32_t intern(const uint64_t *pc, uint32_t n)
{
    uint64_t h = 0x9E3779B97F4A7C15ull ^ n;
    for (uint32_t i = 0; i < n; i++) h = mix64(h ^ pc[i]) + i;
    h |= 1;
    uint32_t mine = 0;
    for (uint32_t i = 0; i < STACK_SLOTS; i++) {
        struct slot *s = &T.slots[(h + i) & (STACK_SLOTS - 1)];
        uint64_t k = atomic_load_explicit(&s->key, memory_order_acquire);
        if (!k) {
            if (!mine) {
                mine = atomic_fetch_add_explicit(&T.next, 1, memory_order_relaxed) + 1;
                if (mine > TKP_STACKS_MAX) {
                    atomic_fetch_add_explicit(&T.full, 1, memory_order_relaxed);
                    return 0;
                }
                memcpy(T.frames[mine], pc, n * sizeof *pc);
                T.nframes[mine] = (uint8_t)n;
            }
            if (atomic_compare_exchange_strong(&s->key, &k, h)) {
                atomic_store_explicit(&s->id, mine, memory_order_release);
                return mine;
            }
        }
        if (k != h) continue;
        uint32_t id = atomic_load_explicit(&s->id, memory_order_acquire);
        if (!id) break; /* being inserted by another thread right now: use an id of our own */
        if (T.nframes[id] == n && !memcmp(T.frames[id], pc, n * sizeof *pc)) return id;
    }
    if (!mine) {
        mine = atomic_fetch_add_explicit(&T.next, 1, memory_order_relaxed) + 1;
        if (mine > TKP_STACKS_MAX) return atomic_fetch_add(&T.full, 1), 0;
        memcpy(T.frames[mine], pc, n * sizeof *pc);
        T.nframes[mine] = (uint8_t)n;
    }
    return mine;
}

/* Not inlined: its frame buffer (~320 bytes of stack) stays off the unsampled path. */
__attribute__((noinline)) void tkp_stacks_capture(struct tkp_ring *r, uint64_t ts)
{
    void *raw[TKP_STACK_DEPTH + SKIP_MAX];
    tkp_tls.depth++; /* anything the unwinder calls is ours, not the program's */
    int n = unwind(raw, TKP_STACK_DEPTH + SKIP_MAX);
    tkp_tls.depth--;
    int s = 0;
    while (s < n && (uintptr_t)raw[s] >= shim_lo && (uintptr_t)raw[s] < shim_hi) s++;
    if (n - s > TKP_STACK_DEPTH) n = s + TKP_STACK_DEPTH;
    if (n <= s) {
        atomic_fetch_add_explicit(&T.failed, 1, memory_order_relaxed);
        return;
    }
    uint64_t pc[TKP_STACK_DEPTH];
    for (int i = s; i < n; i++) pc[i - s] = (uintptr_t)raw[i];
    uint32_t id = intern(pc, (uint32_t)(n - s));
    if (!id) return;
    struct tkp_ev *e = tkp_ring_reserve(r);
    if (!e) return;
    e->type = TKP_EV_STACK;
    e->ts = ts;
    e->a = id;
    tkp_ring_commit(r);
}

/* ---- writer --------------------------------------------------------------------------------- */

struct pending {
    uint32_t id;
    uint64_t ts;
};
static struct pending *pend; /* by thread index */
static uint32_t pend_cap;
static uint32_t *stack_gen;  /* by id: chunk seq + 1 when emitted in that chunk */
static uint32_t rescanned;   /* chunk seq + 1 of the last module rescan */
static int warned_full;

void tkp_stacks_after_fork(void)
{
    /* the child's chunks count from 0 again: nothing is defined in them yet */
    if (T.sites) memset(T.sites, 0, SITE_SLOTS * sizeof *T.sites);
    for (uint32_t i = 0; i < nmods; i++) mods[i].gen = 0;
    if (stack_gen) memset(stack_gen, 0, (TKP_STACKS_MAX + 1) * sizeof *stack_gen);
    if (pend) memset(pend, 0, pend_cap * sizeof *pend);
    rescanned = 0;
}

void tkp_stacks_note(const struct tkp_ev *e, uint32_t thread)
{
    if (tkp_grow((void **)&pend, &pend_cap, thread, sizeof *pend, 64)) return;
    pend[thread].id = (uint32_t)e->a;
    pend[thread].ts = e->ts;
}

static void pack_str(msgpack_packer *pk, const char *s)
{
    size_t n = strlen(s);
    msgpack_pack_str(pk, n);
    msgpack_pack_str_body(pk, s, n);
}

static void emit_module(msgpack_packer *pk, uint32_t seq, uint64_t pc)
{
    int m = module_of(pc);
    if (m < 0 && rescanned != seq + 1) { /* loaded after the last scan */
        rescanned = seq + 1;
        dl_iterate_phdr(add_module, NULL);
        m = module_of(pc);
    }
    if (m < 0 || mods[m].gen == seq + 1) return;
    mods[m].gen = seq + 1;
    msgpack_pack_array(pk, 6);
    msgpack_pack_int(pk, TKP_REC_MODULE);
    msgpack_pack_uint32(pk, (uint32_t)m);
    pack_str(pk, mods[m].path);
    pack_str(pk, mods[m].build_id);
    msgpack_pack_uint64(pk, mods[m].base);
    msgpack_pack_uint64(pk, mods[m].hi - mods[m].base);
}

uint32_t tkp_stacks_encode(msgpack_packer *pk, uint32_t seq, uint32_t thread, uint64_t ts)
{
    if (TKP_LIKELY(thread >= pend_cap || !pend[thread].id)) return 0;
    uint32_t id = pend[thread].id;
    pend[thread].id = 0;
    if (pend[thread].ts != ts) return 0; /* the LAUNCH after the stack event was dropped */
    if (!stack_gen && !(stack_gen = calloc(TKP_STACKS_MAX + 1, sizeof *stack_gen))) return 0;
    if (!warned_full && atomic_load(&T.full)) {
        warned_full = 1;
        tkp_warn("TOKPROF_STACKS: more than %u distinct stacks; later new ones are not recorded",
                 TKP_STACKS_MAX);
    }
    if (stack_gen[id] == seq + 1) return id;
    stack_gen[id] = seq + 1;
    uint32_t n = T.nframes[id];
    for (uint32_t i = 0; i < n; i++) emit_module(pk, seq, T.frames[id][i]);
    msgpack_pack_array(pk, 3);
    msgpack_pack_int(pk, TKP_REC_STACK);
    msgpack_pack_uint32(pk, id);
    msgpack_pack_array(pk, n);
    for (uint32_t i = 0; i < n; i++) msgpack_pack_uint64(pk, T.frames[id][i]);
    return id;
}
