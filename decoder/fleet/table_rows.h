/* tokprof decoder: the rows of one capture for the fleet tables (table.h has the columns, the
 * identity and the sinks; this file reads a capture and fills them). */
#ifndef TKP_TABLE_ROWS_H
#define TKP_TABLE_ROWS_H

#include <stddef.h>
#include <stdint.h>

#include "fleet/table.h"

struct tkp_classes;

/* Reads one capture (files[0..n): one process's files, or a snapshot) and writes the rows of
 * every table whose outs[] is not NULL. Returns 0 (a torn tail is not an error: info->torn) or a
 * tkp_err with why ("PATH: not a tokprof capture (bad magic)", "out of memory", a sink error). */
int tkp_tab_capture(const char *const *files, size_t n, const struct tkp_classes *cl,
                    const struct tkp_tab_ident *id, struct tkp_tab_out *const *outs,
                    struct tkp_tab_info *info, char *why, size_t whylen);

/* The capture_id of the capture whose (first) file is path, from its META alone. 0 or the
 * reader's error. */
int tkp_tab_capture_id(const char *path, uint64_t *id);

#endif
