/* tokprof decoder: an SVG flame graph of folded stacks (Brendan Gregg's layout: the root at the
 * bottom, one box per frame, width proportional to weight, siblings merged by name and sorted
 * alphabetically). Self-contained SVG: no script, a <title> tooltip per box, for `tokprof stacks
 * --svg` and the HTML report. */
#ifndef TKP_FLAME_H
#define TKP_FLAME_H

#include <stdint.h>
#include <stdio.h>

/* One folded stack: frames root first, and its weight (launches, nanoseconds, ...). */
struct tkp_flame_line {
    const char *const *frames;
    uint32_t n;
    uint64_t weight;
};

/* Writes the whole SVG document to out. title is the heading, unit names the weight in
 * tooltips ("launches"). Lines of weight 0 are ignored. Returns 0, TKP_ERR_NOMEM or TKP_ERR_IO
 * (out could not be written). */
int tkp_flame_svg(FILE *out, const struct tkp_flame_line *lines, size_t n, const char *title,
                  const char *unit);

#endif
