/* Captures whose GPU records come on time or late (latecap.c). */
#ifndef LATECAP_H
#define LATECAP_H

#include "capwriter.h"

/* 60 token steps with GPU records: late 0 writes each step's GPU records in the next chunk,
 * late 1 all of them in one last chunk, seconds after the last step. */
void latecap_build(struct capw *w, int late);

#endif
