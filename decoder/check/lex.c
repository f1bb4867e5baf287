/* tokprof check: the spec lexer.
 *
 * Numbers take their unit as a suffix, with or without a space ("30ms", "30 ms", "3 steps"):
 * the lexer converts times to nanoseconds so nothing later has to know about units. A '/'
 * starts a regex only where an operand is expected (after =~), which the parser signals by
 * asking for one; everywhere else it divides. */
#include "check/lex.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void tkp_lex_init(struct tkp_lexer *lx, const char *src)
{
    memset(lx, 0, sizeof(*lx));
    lx->src = lx->p = lx->line_start = src;
    lx->line = 1;
}

static void skip_space(struct tkp_lexer *lx)
{
    for (;;) {
        char c = *lx->p;
        if (c == '\n') {
            lx->p++;
            lx->line++;
            lx->line_start = lx->p;
        } else if (c == ' ' || c == '\t' || c == '\r') {
            lx->p++;
        } else if ((c == '/' && lx->p[1] == '/') || c == '#') {
            while (*lx->p && *lx->p != '\n')
                lx->p++;
        } else {
            return;
        }
    }
}

static int word_at(const char *p, const char *w, size_t *len)
{
    size_t n = strlen(w);
    if (strncmp(p, w, n) || isalnum((unsigned char)p[n]) || p[n] == '_') return 0;
    *len = n;
    return 1;
}

/* A unit after a number: returns the multiplier to base units and the unit kind. */
static int read_unit(const char *p, size_t *len, double *mul, int *unit)
{
    static const struct {
        const char *w;
        double mul;
        int unit;
    } units[] = {
        {"ns", 1, U_NS},          {"us", 1e3, U_NS},         {"ms", 1e6, U_NS},
        {"s", 1e9, U_NS},         {"steps", 1, U_STEPS},     {"step", 1, U_STEPS},
        {"records", 1, U_RECORDS}, {"record", 1, U_RECORDS}, {"%", 0.01, U_NONE},
    };
    for (size_t i = 0; i < sizeof(units) / sizeof(*units); i++) {
        if (units[i].w[0] == '%') {
            if (*p == '%') {
                *len = 1, *mul = units[i].mul, *unit = U_NONE;
                return 1;
            }
            continue;
        }
        if (word_at(p, units[i].w, len)) {
            *mul = units[i].mul, *unit = units[i].unit;
            return 1;
        }
    }
    return 0;
}

static int fail(struct tkp_lexer *lx, const char *msg)
{
    snprintf(lx->err, sizeof(lx->err), "%s", msg);
    lx->tok.kind = TK_ERR;
    return TK_ERR;
}

int tkp_lex_next(struct tkp_lexer *lx)
{
    skip_space(lx);
    struct tkp_token *t = &lx->tok;
    memset(t, 0, sizeof(*t));
    t->p = lx->p;
    t->line = lx->line;
    t->col = (uint32_t)(lx->p - lx->line_start) + 1;
    const char *p = lx->p;
    if (!*p) return t->kind = TK_EOF;
    if (isalpha((unsigned char)*p) || *p == '_') {
        while (isalnum((unsigned char)*p) || *p == '_')
            p++;
        t->kind = TK_ID;
    } else if (isdigit((unsigned char)*p) || (*p == '.' && isdigit((unsigned char)p[1]))) {
        char *end;
        t->num = strtod(p, &end);
        /* "3." ends a quantifier ("... >= 3. true"): the dot is not the number's */
        if (end[-1] == '.' && end - 1 > p) end--;
        p = end;
        const char *q = p;
        while (*q == ' ' || *q == '\t')
            q++;
        size_t ul;
        double mul;
        int unit;
        /* "5 s" reads as five seconds only when the s is a word of its own */
        if (read_unit(q, &ul, &mul, &unit)) {
            t->num *= mul;
            t->unit = unit;
            p = q + ul;
        }
        t->kind = TK_NUM;
    } else if (*p == '"') {
        p++;
        while (*p && *p != '"' && *p != '\n') {
            if (*p == '\\' && p[1]) p++;
            p++;
        }
        if (*p != '"') return fail(lx, "unterminated string");
        p++;
        t->kind = TK_STR;
    } else {
        static const char *const two[] = {"==", "!=", "<=", ">=", "=~", "->", NULL};
        t->kind = TK_PUNCT;
        p++;
        for (int i = 0; two[i]; i++)
            if (!strncmp(lx->p, two[i], 2)) p = lx->p + 2;
        if (p == lx->p + 1 && !strchr("()[],.:;=<>+-*/!{}", *lx->p))
            return fail(lx, "unexpected character");
    }
    t->len = (size_t)(p - lx->p);
    lx->p = p;
    return t->kind;
}

int tkp_lex_regex(struct tkp_lexer *lx)
{
    struct tkp_token *t = &lx->tok;
    const char *p = t->p + 1;
    while (*p && *p != '/' && *p != '\n') {
        if (*p == '\\' && p[1]) p++;
        p++;
    }
    if (*p != '/') return fail(lx, "unterminated regex");
    t->kind = TK_REGEX;
    t->len = (size_t)(p + 1 - t->p);
    lx->p = p + 1;
    return TK_REGEX;
}

int tkp_lex_is(const struct tkp_lexer *lx, const char *s)
{
    const struct tkp_token *t = &lx->tok;
    return (t->kind == TK_ID || t->kind == TK_PUNCT) && strlen(s) == t->len &&
           !memcmp(t->p, s, t->len);
}
