/* tokprof decoder: a streaming JSON reader (pull tokenizer). It reads through a callback in
 * 64 KiB blocks and hands out one token at a time, so a 1 GB Chrome trace is read in constant
 * memory: the block, the current string (at most TKP_JSONR_STR_MAX bytes kept) and the nesting
 * stack. It checks the grammar (RFC 8259) as it goes; the first error stops it with one line in
 * `why` naming the byte offset and what was expected ("byte 1234: expected ',' or '}' in an
 * object"), and every later call returns the same error.
 *
 *     struct tkp_jsonr j;
 *     tkp_jsonr_init(&j, read_fn, ctx);
 *     while ((t = tkp_jsonr_next(&j)) > 0) ... j.str / j.len for KEY, STR and NUM ...
 *     if (t < 0) ... j.why ...
 *     tkp_jsonr_free(&j);
 *
 * No library in Debian streams JSON with exact decimals and byte offsets in its errors as this
 * needs (json-c and jansson build whole documents; yajl is unmaintained since 2014), so this one is
 * ours: about 300 lines. */
#ifndef TKP_JSONR_H
#define TKP_JSONR_H

#include <stddef.h>
#include <stdint.h>

#define TKP_JSONR_STR_MAX 65536 /* bytes kept of one string; the rest is checked and dropped */
#define TKP_JSONR_DEPTH_MAX 256

enum tkp_jtok {
    TKP_J_ERR = -1,
    TKP_J_END = 0, /* the end of the input after one whole value */
    TKP_J_OBJ,
    TKP_J_OBJ_END,
    TKP_J_ARR,
    TKP_J_ARR_END,
    TKP_J_KEY, /* an object member's name: str, len */
    TKP_J_STR, /* a string value: str, len (unescaped, UTF-8, NUL-terminated) */
    TKP_J_NUM, /* a number: its text as written in str, len */
    TKP_J_TRUE,
    TKP_J_FALSE,
    TKP_J_NULL,
};

/* Reads up to n bytes into buf: returns how many (0 at the end), or -1 on an error (the reader
 * says "read error"). */
typedef long tkp_jsonr_read_fn(void *ctx, void *buf, size_t n);

struct tkp_jsonr {
    tkp_jsonr_read_fn *rd;
    void *ctx;
    uint8_t *buf;
    size_t pos, len;
    uint64_t off; /* bytes before buf[0] */
    int eof, err;
    char *str;        /* the current KEY, STR or NUM (owned) */
    size_t slen;      /* its length in bytes */
    int truncated;    /* 1: the current string was longer than TKP_JSONR_STR_MAX */
    uint64_t tok_off; /* byte offset of the current token */
    int state;
    int depth;
    uint8_t stack[TKP_JSONR_DEPTH_MAX]; /* 1 object, 2 array */
    char why[192];
};

/* Returns 0 or TKP_ERR_NOMEM. */
int tkp_jsonr_init(struct tkp_jsonr *j, tkp_jsonr_read_fn *rd, void *ctx);
void tkp_jsonr_free(struct tkp_jsonr *j);
/* The next token (enum tkp_jtok); TKP_J_ERR with j->why set on bad or cut input. */
int tkp_jsonr_next(struct tkp_jsonr *j);
/* After a KEY (or at any point where a value comes next): reads past that whole value. Returns 0
 * or TKP_J_ERR. */
int tkp_jsonr_skip(struct tkp_jsonr *j);

/* A number's text as an exact fixed-point integer: v * 10^scale, rounded half away from zero
 * when it has more fractional digits ("12.3456" at scale 3 -> 12346). Returns 0, or -1 when the
 * text is not a JSON number or the result does not fit in int64_t. */
int tkp_json_fixed(const char *s, size_t n, int scale, int64_t *out);

#endif
