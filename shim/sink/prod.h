/* The production settings (prod.c): stream mode (files with a size cap, rotation and a keep
 * count) or flight mode (flight.c), and the flight recorder's triggers. Read once at start. */
#ifndef TKP_SINK_PROD_H
#define TKP_SINK_PROD_H

#include <stdint.h>

/* The disk bounds a process gets when nothing is set (docs/OPERATIONS.md argues them). */
#define TKP_DEFAULT_MAX_MB 256
#define TKP_DEFAULT_KEEP 4
#define TKP_DEFAULT_MIN_FREE_MB 1024
#define TKP_DEFAULT_MIN_FREE_PCT 5

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
};
extern struct tkp_prod_config tkp_prod;
/* Reads the production TOKPROF_* variables (README.md); a bad value gets one warning and the
 * default. Called by shim/init.c after tkp_config_load(). */
void tkp_prod_config_load(void);

#endif
