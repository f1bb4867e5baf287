/* tokprof check: the lowering (lower.c), from compiled nodes to programs for the evaluator. */
#ifndef TKP_CHECK_LOWER_H
#define TKP_CHECK_LOWER_H

#include "check/prog.h"

/* Compiles sp's checked tree (tkp_spec_compile calls it). */
int tkp_spec_lower(struct tkp_spec *sp, struct tkp_spec_err *e);
void tkp_code_free(struct tkp_code *c);

#endif
