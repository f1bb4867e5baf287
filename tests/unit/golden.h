/* The golden capture: three chunks, two threads, every record type, a negative dt, an unknown
 * record type. Built by golden_build() for the reader tests and by mkcapture for the CLI tests
 * (tests/data/README.md lists the expected outputs). */
#ifndef GOLDEN_H
#define GOLDEN_H

#include <stddef.h>

#include "capwriter.h"

#define GOLDEN_CHUNKS 3
#define GOLDEN_RECORDS 37 /* delivered by the reader: all but the one of unknown type */

/* Writes the chunks into w (whose header is written); offsets[i] gets chunk i's offset. */
void golden_build(struct capw *w, size_t offsets[GOLDEN_CHUNKS]);

#endif
