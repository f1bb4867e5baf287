/* tokprof check: the verdict table, the JSON lines, and --explain. */
#ifndef TKP_SPEC_REPORT_H
#define TKP_SPEC_REPORT_H

#include <stdio.h>

#include "monitor.h"

void tkp_report_table(FILE *f, const struct tkp_spec *sp, const struct tkp_mon *m);
void tkp_report_json(FILE *f, const struct tkp_spec *sp, const struct tkp_mon *m);
void tkp_report_explain(FILE *f, const struct tkp_spec *sp);

#endif
