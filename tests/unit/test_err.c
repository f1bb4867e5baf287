/* One error convention (decoder/base/err.h): every code has a message of its own, and a spec
 * error is not a capture error (issue 18: a spec error without a reason once printed "malformed
 * record", because the spec code was the record code under another name). */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "check/parse.h"
#include "check/compile.h"

Test(err, every_code_has_its_own_message)
{
    for (int a = TKP_ERR_SPEC; a <= TKP_OK; a++) {
        cr_assert_str_neq(tkp_strerror(a), "unknown error", "code %d", a);
        for (int b = a + 1; b <= TKP_OK; b++)
            cr_assert_str_neq(tkp_strerror(a), tkp_strerror(b), "codes %d and %d", a, b);
    }
}

Test(err, a_bad_spec_is_a_spec_error)
{
    char *text = strdup("assert broken: s.dur <=\n");
    struct tkp_spec *sp = NULL;
    struct tkp_spec_err e = {0};
    int err = tkp_spec_parse(text, "t.tks", &sp, &e);
    cr_assert_eq(err, TKP_ERR_SPEC);
    cr_assert_str_eq(tkp_strerror(err), "bad spec");
    cr_assert_neq(TKP_ERR_SPEC, TKP_ERR_RECORD);
    tkp_spec_free(sp);
}
