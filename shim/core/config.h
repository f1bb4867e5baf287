/* The capture's own settings (config.c): TOKPROF_* variables read once at start. The stacks
 * (record/stacks.c) and the production settings (sink/prod.c) read theirs in their own folders. */
#ifndef TKP_CORE_CONFIG_H
#define TKP_CORE_CONFIG_H

#include <stdint.h>

enum tkp_step_mode {
    TKP_STEPMODE_AUTO,
    TKP_STEPMODE_SYNC,
    TKP_STEPMODE_GRAPH,
    TKP_STEPMODE_NVTX,
    TKP_STEPMODE_KERNEL,
    TKP_STEPMODE_MARKER,
};
struct tkp_config {
    int disabled;
    char out_dir[512];
    int step_mode;
    char step_regex[256]; /* nvtx:RE / kernel:RE */
    unsigned buffer_mb;   /* per-thread ring budget, all threads together */
    unsigned ring_kb;     /* one thread's ring */
    unsigned flush_ms;
    uint64_t step_copy_max; /* auto: largest DtoH copy that can end a step */
    char program[256];      /* the program's name when the shim was loaded (tkp_config_note_program) */
};
extern struct tkp_config tkp_cfg;
/* Reads TOKPROF_LOG, TOKPROF_DISABLE, TOKPROF_OUT, TOKPROF_STEP, the ring sizes and the flush
 * period once; a bad value gets one warning line and the default. */
void tkp_config_load(void);
/* Keeps the program's short name as it is when the shim is loaded (the constructor). A server may
 * rename its processes later (setproctitle, as vLLM's EngineCore does, writes over argv[0], where
 * program_invocation_short_name points): capture files and the meta record keep this copy.
 * "program" when the name is empty. Kept across fork. */
void tkp_config_note_program(void);
/* 1 in a secure-execution process (AT_SECURE: setuid, setgid, file capabilities): the shim then
 * reads no variable and records nothing (config.c says why). */
int tkp_secure_exec(void);
/* getenv for TOKPROF_* variables: secure_getenv(3), NULL in a secure-execution process. */
const char *tkp_env(const char *name);

#endif
