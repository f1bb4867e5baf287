/* tokprof check: the verdict table, the JSON lines, and --explain. */
#ifndef TKP_CHECK_RESULTS_H
#define TKP_CHECK_RESULTS_H

#include <stdio.h>

#include "check/monitor.h"

void tkp_report_table(FILE *f, const struct tkp_spec *sp, const struct tkp_mon *m);
void tkp_report_json(FILE *f, const struct tkp_spec *sp, const struct tkp_mon *m);
void tkp_report_explain(FILE *f, const struct tkp_spec *sp);

/* A program listing, for --explain. */
void tkp_prog_print(FILE *f, const struct tkp_spec *sp, int prog, int indent);

#endif
