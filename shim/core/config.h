/* The shim's settings (config.c): every TOKPROF_* variable in one table, built from
 * include/tokprof/settings.def (name, kind, default, bounds, values, README line) with where each
 * goes and its parser, read once by tkp_config_load() when a capture starts, before any hook
 * records. Nothing else in the shim reads the environment; the folders above read the parsed
 * values here (tkp_cfg, tkp_prod). */
#ifndef TKP_CORE_CONFIG_H
#define TKP_CORE_CONFIG_H

#include <regex.h>
#include <stddef.h>
#include <stdint.h>

enum tkp_step_mode {
    TKP_STEPMODE_AUTO,
    TKP_STEPMODE_SYNC,
    TKP_STEPMODE_GRAPH,
    TKP_STEPMODE_NVTX,
    TKP_STEPMODE_KERNEL,
    TKP_STEPMODE_MARKER,
};
enum tkp_stacks_mode { TKP_STACKS_OFF = 0, TKP_STACKS_FIRST = 1, TKP_STACKS_SAMPLE = 2 };
enum tkp_gpu_mode { TKP_GPUMODE_ALWAYS, TKP_GPUMODE_WINDOW, TKP_GPUMODE_TRIGGER, TKP_GPUMODE_OFF };
/* In the order of their words in settings.def. */
enum tkp_clock_choice { TKP_CLOCK_AUTO, TKP_CLOCK_TSC, TKP_CLOCK_MONOTONIC };
enum tkp_unwinder_choice { TKP_UNWINDER_AUTO, TKP_UNWINDER_LIBUNWIND, TKP_UNWINDER_BACKTRACE };

struct tkp_config {
    int disabled;
    char out_dir[512];
    int step_mode;
    char step_regex[256]; /* nvtx:RE / kernel:RE, as written */
    /* nvtx:RE / kernel:RE compiled (REG_EXTENDED | REG_NOSUB) when the settings are read, before
     * any hook can run: application threads only regexec() it. Valid in those two modes. */
    regex_t step_re;
    /* which compile step_re is (1, 2, ... in this process): what record/symtab.c keeps of its
     * answers per kernel is of this one only */
    uint32_t step_re_gen;
    unsigned buffer_mb;     /* per-thread ring budget, all threads together */
    unsigned ring_kb;       /* one thread's ring */
    unsigned flush_ms;
    unsigned time_ns;       /* TOKPROF_TIME_NS: host times rounded down to a multiple of it */
    uint64_t step_copy_max; /* auto: largest DtoH copy that can end a step */
    int clock;              /* enum tkp_clock_choice */
    int stacks_mode;        /* enum tkp_stacks_mode */
    uint32_t stacks_every;  /* first:K or sample:N */
    int stacks_unwinder;    /* enum tkp_unwinder_choice */
    int gpu_mode;           /* enum tkp_gpu_mode */
    unsigned gpu_win_n, gpu_win_m;
    unsigned gpu_trigger_steps;
    unsigned gpu_buffer_mb;
    char cupti_path[512];
    char program[256]; /* the program's name when the shim was loaded (tkp_config_note_program) */
};
extern struct tkp_config tkp_cfg;

/* The disk bounds a process gets when nothing is set (docs/OPERATIONS.md argues them). */
#define TKP_DEFAULT_MAX_MB 256
#define TKP_DEFAULT_KEEP 4
#define TKP_DEFAULT_MIN_FREE_MB 1024
#define TKP_DEFAULT_MIN_FREE_PCT 5

/* The production settings: stream files' budget, the flight recorder and its triggers (used by
 * sink/). */
struct tkp_prod_config {
    int flight;              /* TOKPROF_MODE=flight */
    uint64_t max_bytes;      /* TOKPROF_MAX_MB: stream files rotate before this; 0 no cap */
    unsigned keep;           /* TOKPROF_KEEP: newest files kept per process; 0 all */
    uint64_t min_free_bytes; /* TOKPROF_MIN_FREE_MB: stop writing under this much free space */
    unsigned min_free_pct;   /* TOKPROF_MIN_FREE_PCT: ... or under this % of the filesystem */
    uint64_t flight_bytes;   /* TOKPROF_FLIGHT_MB: compressed chunks the flight ring may hold */
    uint64_t before_ns;      /* TOKPROF_FLIGHT_BEFORE_S */
    uint64_t after_ns;       /* TOKPROF_FLIGHT_AFTER_S */
    uint64_t min_gap_ns;     /* TOKPROF_TRIGGER_MIN_S */
    int step_trigger;        /* 0 none, 1 absolute (step_ns), 2 relative (step_factor x p50) */
    uint64_t step_ns;
    double step_factor;
    int signal;             /* TOKPROF_TRIGGER_SIGNAL, 0 none */
    char trigger_file[512]; /* TOKPROF_TRIGGER_FILE, "" none */
    unsigned test_delay_ms; /* TOKPROF_TEST_WRITER_DELAY_MS: a slow disk, for tests only */
    int test_rep;           /* TOKPROF_TEST_REP: 0 on, 1 off, 2 shadow (tests only) */
    int test_gpu;           /* TOKPROF_TEST_GPU: 0 on, 1 off, 2 shadow, 3 plain (tests only) */
};
extern struct tkp_prod_config tkp_prod;

/* One row of the table: settings.def's description of a variable (see there), and where its
 * value goes and how it is read. */
struct tkp_setting {
    const char *name;
    char kind;          /* 'u' 'n' 'c' 'C' 's' 'b' */
    const char *def;    /* the default as the variable would spell it; "": none (unset) */
    double lo, hi;      /* 'u', 'n': the range of the value as written */
    const char *values; /* 'c', 'C': the accepted values */
    const char *doc;    /* its line in README.md's table */
    /* Reads v (NULL: unset) into dst; 0, or -1 when v is not a valid value. */
    int (*parse)(const struct tkp_setting *s, const char *v);
    void *dst;
    unsigned size; /* sizeof *dst where the kind's parser needs it (numbers: 4 or 8; 's') */
    double scale;  /* numbers: what the value as written is multiplied by (MB, seconds) */
};
/* The table, in settings.def's order; *n its length. Static storage. */
const struct tkp_setting *tkp_settings(size_t *n);

/* Reads every TOKPROF_* variable once (secure_getenv, in the table's order: TOKPROF_LOG first,
 * so that it governs the others' warnings) and compiles TOKPROF_STEP's regex. A bad value gets
 * one warning line and the default. Called by shim/init.c's start(), under its once, and again
 * in a fork child's start. */
void tkp_config_load(void);
/* Sets one variable as if the environment held name=value (NULL: unset): 0, -1 for a bad value
 * (one warning, the default), -2 for a name not in the table. For tests. */
int tkp_config_set(const char *name, const char *value);
/* Keeps the program's short name as it is when the shim is loaded (the constructor). A server may
 * rename its processes later (setproctitle, as vLLM's EngineCore does, writes over argv[0], where
 * program_invocation_short_name points): capture files and the meta record keep this copy.
 * "program" when the name is empty. Kept across fork. */
void tkp_config_note_program(void);
/* 1 in a secure-execution process (AT_SECURE: setuid, setgid, file capabilities): the shim then
 * reads no variable and records nothing (config.c says why). */
int tkp_secure_exec(void);

#endif
