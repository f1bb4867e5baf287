/* Fuzz target for the spec parser and compiler (libFuzzer's entry point). regression_driver.c
 * replays its corpus (corpus/spec/ and the specs of tests/spec/) in CTest; run_fuzz.sh builds it
 * with libFuzzer to fuzz for real (FUZZ_TARGET=spec). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check/ast.h"
#include "check/results.h"
#include "check/parse.h"
#include "check/compile.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = 0;
    struct tkp_spec *sp = NULL;
    struct tkp_spec_err e;
    int rc = tkp_spec_parse(text, "fuzz", &sp, &e); /* sp owns text from here */
    if (!rc) rc = tkp_spec_compile(sp, &e);
    if (!rc) {
        FILE *null = fopen("/dev/null", "w");
        if (null) {
            tkp_report_explain(null, sp);
            fclose(null);
        }
    } else if (e.msg[0] == 0) {
        abort(); /* every failure must say why */
    }
    tkp_spec_free(sp);
    return 0;
}
