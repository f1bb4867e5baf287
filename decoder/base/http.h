/* tokprof decoder: minimal HTTP/1.1 over plain sockets, no TLS, glibc only. A client, enough for
 * ClickHouse's HTTP interface (POST a query with a body, read the status and the reply), and a
 * server, enough for a metrics endpoint (tokprof serve: GET only, one request per connection).
 *
 *     struct tkp_url u;
 *     tkp_url_parse("http://127.0.0.1:8123", &u, why, sizeof why);
 *     err = tkp_http_post(&u, "/?query=...", "Content-Encoding: gzip\r\n", body, n,
 *                         &status, &reply, why, sizeof why);   // free(reply)
 */
#ifndef TKP_HTTP_H
#define TKP_HTTP_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

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

/* ---- server ----
 *
 * Non-blocking and driven by the caller's loop, so that no client can hold another: every
 * connection is a small state (its request bytes, then its reply) behind one poll(2). Bounded:
 * at most TKP_HTTPD_CONNS connections (a new one past that closes the oldest still sending its
 * request), TKP_HTTPD_REQUEST_MAX bytes of request head (then 431), TKP_HTTPD_HEADER_MS to send
 * it (then 408), TKP_HTTPD_CONN_MS for the whole exchange. GET is answered by the handler; any
 * other method gets 405 with "Allow: GET"; the connection closes after each reply.
 *
 *     struct tkp_httpd *h;
 *     tkp_httpd_new(listen_fd, &h);
 *     while (running) {
 *         ... other work ...
 *         tkp_httpd_poll(h, 50, handler, arg);   // waits at most 50 ms
 *     }
 *     tkp_httpd_free(h);
 */
#define TKP_HTTPD_CONNS 256
#define TKP_HTTPD_REQUEST_MAX 8192
#define TKP_HTTPD_HEADER_MS 5000
#define TKP_HTTPD_CONN_MS 15000

struct tkp_httpd;

/* Writes the body for a GET of path (the request target, query included) into body; sets *type
 * when the body is not text/plain. Returns the status: 200, or 404 for a path it does not know. */
typedef int (*tkp_httpd_fn)(void *arg, const char *path, FILE *body, const char **type);

/* Serves on listen_fd (bound and listening; made non-blocking here; the caller still owns and
 * closes it). Returns 0 or NOMEM. */
int tkp_httpd_new(int listen_fd, struct tkp_httpd **out);
/* Waits up to timeout_ms for any socket (0: only what is ready now), then accepts, reads,
 * answers whole requests through fn, writes what the clients take, and closes what is done or
 * past its deadline. Returns 0, or IO when poll itself failed (EINTR is 0). */
int tkp_httpd_poll(struct tkp_httpd *h, int timeout_ms, tkp_httpd_fn fn, void *arg);
/* Open connections (tests, logs). */
size_t tkp_httpd_conns(const struct tkp_httpd *h);
/* Closes every connection (not the listening socket) and frees h; accepts NULL. */
void tkp_httpd_free(struct tkp_httpd *h);

#endif
