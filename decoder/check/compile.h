/* tokprof check: the compiler (compile.c), from the parsed tree to monitors. */
#ifndef TKP_CHECK_COMPILE_H
#define TKP_CHECK_COMPILE_H

#include "check/ast.h"

/* Resolves names, checks levels and monitorability, rewrites quantifiers, allocates state. */
int tkp_spec_compile(struct tkp_spec *sp, struct tkp_spec_err *e);
void tkp_spec_free(struct tkp_spec *sp); /* accepts NULL */

#endif
