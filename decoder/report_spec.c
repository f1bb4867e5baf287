/* tokprof decoder: the spec checker for `tokprof report` (report_spec.h). */
#include "report_spec.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "err.h"
#include "reader.h"
#include "spec/ast.h"
#include "spec/monitor.h"
#include "spec/report.h"

static int load(struct tkp_ctx *ctx, const char *path, struct tkp_spec **sp)
{
    FILE *f = fopen(path, "rb");
    if (!f) return tkp_cmd_fail(ctx, TKP_ERR_IO, "%s: %s", path, strerror(errno));
    char *text = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&text, &len);
    int c;
    while (m && (c = fgetc(f)) != EOF && len < (16u << 20))
        fputc(c, m);
    fclose(f);
    if (!m) return tkp_cmd_fail(ctx, TKP_ERR_NOMEM, "out of memory");
    fclose(m);
    struct tkp_spec_err e;
    *sp = NULL;
    int rc = tkp_spec_parse(text, path, sp, &e);
    if (!rc) rc = tkp_spec_compile(*sp, &e);
    if (!rc) return 0;
    tkp_spec_free(*sp);
    *sp = NULL;
    if (rc == TKP_ERR_NOMEM) return tkp_cmd_fail(ctx, rc, "out of memory");
    return tkp_cmd_fail(ctx, rc, "%s:%u:%u: %s (try 'tokprof check')", path, e.line, e.col, e.msg);
}

int tkp_report_spec(struct tkp_ctx *ctx, const char *spec, const char *capture, char **text,
                    int *violated)
{
    struct tkp_spec *sp;
    struct tkp_mon *mon;
    struct tkp_reader *r;
    struct tkp_record rec;
    int rc = load(ctx, spec, &sp);
    if (rc) return rc;
    if (tkp_mon_new(sp, &mon)) {
        tkp_spec_free(sp);
        return tkp_cmd_fail(ctx, TKP_ERR_NOMEM, "out of memory");
    }
    if ((rc = tkp_cmd_open(ctx, capture, &r))) {
        tkp_mon_free(mon);
        tkp_spec_free(sp);
        return rc;
    }
    while ((rc = tkp_reader_next(r, &rec)) == 1)
        if ((rc = tkp_mon_feed(mon, &rec)) < 0) break;
    if (rc != TKP_ERR_NOMEM) rc = tkp_mon_finish(mon);
    *violated = 0;
    for (int i = 0; rc != TKP_ERR_NOMEM && i < sp->nas; i++)
        if (!sp->as[i].warn && tkp_mon_verdict(mon, i, NULL) == 0) *violated = 1;
    if (rc == TKP_ERR_NOMEM) {
        tkp_cmd_fail(ctx, rc, "out of memory");
    } else {
        size_t len = 0;
        FILE *m = open_memstream(text, &len);
        if (m) {
            tkp_report_table(m, sp, mon); /* names live until the reader closes */
            fclose(m);
            rc = 0;
        } else {
            rc = tkp_cmd_fail(ctx, TKP_ERR_NOMEM, "out of memory");
        }
    }
    tkp_reader_close(r);
    tkp_mon_free(mon);
    tkp_spec_free(sp);
    return rc;
}
