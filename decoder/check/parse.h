/* tokprof check: the parser (parse.c), spec text to the tree of ast.h. */
#ifndef TKP_CHECK_PARSE_H
#define TKP_CHECK_PARSE_H

#include "check/ast.h"

/* Parses text (NUL-terminated, owned by the spec afterwards) into *out. Returns 0 or
 * TKP_ERR_SPEC with *e filled. */
int tkp_spec_parse(char *text, const char *path, struct tkp_spec **out, struct tkp_spec_err *e);

#endif
