/* tokprof decoder: a minimal HTTP/1.1 client over a plain socket, enough for ClickHouse's HTTP
 * interface (POST a query with a body, read the status and the reply). No TLS; glibc only.
 *
 *     struct tkp_url u;
 *     tkp_url_parse("http://127.0.0.1:8123", &u, why, sizeof why);
 *     err = tkp_http_post(&u, "/?query=...", "Content-Encoding: gzip\r\n", body, n,
 *                         &status, &reply, why, sizeof why);   // free(reply)
 */
#ifndef TKP_HTTP_H
#define TKP_HTTP_H

#include <stddef.h>

#define TKP_HTTP_TIMEOUT_S 120 /* a send or receive that stalls this long fails */
#define TKP_HTTP_REPLY_MAX (16u << 20)

struct tkp_url {
    char host[256];
    char port[8];
    char base[256]; /* path prefix, "" for the root */
};

/* "http://HOST[:PORT][/PATH]" (PORT defaults to 8123). Returns 0 or TKP_ERR_USAGE with why. */
int tkp_url_parse(const char *s, struct tkp_url *u, char *why, size_t whylen);

/* POSTs body (n bytes) to u's base + path_query with the extra header lines `headers` (each
 * ending in \r\n; NULL none). On a reply: 0, *status its code, *reply its body (malloc'd,
 * NUL-terminated, the caller frees). No reply (refused, reset, timed out): TKP_ERR_IO and why
 * ("connection refused"). NOMEM. */
int tkp_http_post(const struct tkp_url *u, const char *path_query, const char *headers,
                  const void *body, size_t n, int *status, char **reply, char *why, size_t whylen);

/* Percent-encodes s into out (at most n bytes, NUL included) for a URL query value; returns 0, or
 * -1 when it does not fit. */
int tkp_url_encode(const char *s, char *out, size_t n);

#endif
