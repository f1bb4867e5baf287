/* tokprof check: the spec lexer. Tokens carry their line and column for error reports. */
#ifndef TKP_CHECK_LEX_H
#define TKP_CHECK_LEX_H

#include <stddef.h>
#include <stdint.h>

#include "check/ast.h"

struct tkp_token {
    int kind;        /* enum tkp_tok */
    const char *p;   /* start in the source */
    size_t len;
    double num;      /* TK_NUM: value in base units (ns for times) */
    int unit;        /* TK_NUM: U_NONE, U_STEPS, U_RECORDS, U_NS (had a time unit) */
    uint32_t line, col;
};

struct tkp_lexer {
    const char *src, *p;
    uint32_t line;
    const char *line_start;
    struct tkp_token tok; /* the current token */
    char err[128];        /* TK_ERR: why */
};

void tkp_lex_init(struct tkp_lexer *lx, const char *src);
/* Advances to the next token (in lx->tok); returns its kind. */
int tkp_lex_next(struct tkp_lexer *lx);
/* The current token is '/' where an operand is expected: rescans it as /regex/. */
int tkp_lex_regex(struct tkp_lexer *lx);
/* 1 when the current token is the punctuation or word s. */
int tkp_lex_is(const struct tkp_lexer *lx, const char *s);

#endif
