/* tokprof decoder: the Prometheus text exposition (format 0.0.4, with the OpenMetrics naming
 * conventions: base units, `_seconds`, counters ending in `_total`, HELP and TYPE for each family)
 * of the live figures (live.h), for `tokprof serve`.
 *
 * Families, each labelled program="...", pid="..." and the caller's fixed labels:
 *   tokprof_token_step_duration_seconds  histogram of token-step durations
 *   tokprof_tokens_total, tokprof_token_steps_total, tokprof_steps_total, tokprof_launches_total,
 *   tokprof_gpu_kernels_total, tokprof_dropped_records_total                         counters
 *   tokprof_gpu_busy_seconds_total, tokprof_gpu_class_seconds_total{class="..."}     counters
 *   tokprof_process_running                                                         gauge
 *   tokprof_spec_violations_total{assertion, severity}, tokprof_spec_ok{...}   with a spec
 * Label cardinality is bounded: processes followed (TKP_FOLLOW_PROCS_MAX) x classes
 * (TKP_CLASSES_MAX); kernel names are never labels. */
#ifndef TKP_PROM_H
#define TKP_PROM_H

#include <stdint.h>
#include <stdio.h>

#include "model/classes.h"
#include "model/live.h"

/* Spec verdicts per process, from the caller's monitors. */
struct tkp_prom_spec {
    int nas;
    const char *const *ids; /* assertion ids */
    const int *warn;        /* 1: warn severity */
    /* violations and evaluations of assertion `as` in process pid (0 when it has no monitor) */
    uint64_t (*violations)(void *arg, uint64_t pid, int as);
    void *arg;
};

/* Writes every family. labels: extra `name="value"` pairs, comma-separated, already escaped
 * (NULL or "" for none). spec may be NULL. */
void tkp_prom_write(FILE *f, const struct tkp_live *l, const struct tkp_classes *cl,
                    const char *labels, const struct tkp_prom_spec *spec);
/* Escapes a label value (backslash, double quote, newline) into out (cap bytes, NUL included). */
void tkp_prom_escape(char *out, size_t cap, const char *v);

#endif
