/* Synthetic GPU captures (latecap.c): GPU records on time or late; an MoE with grouped experts. */
#ifndef LATECAP_H
#define LATECAP_H

#include "capwriter.h"

/* 60 token steps with GPU records: late 0 writes each step's GPU records in the next chunk,
 * late 1 all of them in one last chunk, seconds after the last step. */
void latecap_build(struct capw *w, int late);

/* 40 steps of an MoE whose experts are grouped GEMM kernels, cuBLAS calls beside them. */
void moecap_build(struct capw *w);

#endif
