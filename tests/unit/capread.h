/* Test-only: a reader over a capture built with capwriter (criterion tests). */
#ifndef CAPREAD_H
#define CAPREAD_H

#include <criterion/criterion.h>

#include "capwriter.h"
#include "capture/reader.h"

/* A reader of w's capture as it is now (through a temporary file). */
static inline struct tkp_reader *capr_open(const struct capw *w)
{
    FILE *f = capw_tmpfile(w);
    cr_assert(f);
    struct tkp_reader *r;
    char why[256];
    cr_assert_eq(tkp_reader_open_stream(f, &r, why, sizeof(why)), 0, "%s", why);
    return r;
}

#endif
