/* tokprof decoder: a minimal HTTP/1.1 client (see http.h). One connection per request
 * ("Connection: close"), so the reply ends where the connection does; a Content-Length reply is
 * read to its length, a chunked one is decoded. */
#include "base/http.h"

#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "base/err.h"

int tkp_url_parse(const char *s, struct tkp_url *u, char *why, size_t whylen)
{
    memset(u, 0, sizeof(*u));
    if (strncmp(s, "http://", 7))
        return tkp_why(why, whylen, TKP_ERR_USAGE, "--url '%s': want http://HOST[:PORT]", s);
    const char *h = s + 7, *slash = strchr(h, '/'), *end = slash ? slash : h + strlen(h);
    const char *colon = memchr(h, ':', (size_t)(end - h));
    size_t hl = (size_t)((colon ? colon : end) - h);
    if (!hl || hl >= sizeof(u->host) || (colon && (end - colon - 1 < 1 || end - colon - 1 > 5)))
        return tkp_why(why, whylen, TKP_ERR_USAGE, "--url '%s': want http://HOST[:PORT]", s);
    memcpy(u->host, h, hl);
    if (colon) {
        memcpy(u->port, colon + 1, (size_t)(end - colon - 1));
        for (char *p = u->port; *p; p++)
            if (*p < '0' || *p > '9')
                return tkp_why(why, whylen, TKP_ERR_USAGE, "--url '%s': bad port", s);
    } else {
        strcpy(u->port, "8123");
    }
    snprintf(u->base, sizeof(u->base), "%s", slash && slash[1] ? slash : "");
    size_t bl = strlen(u->base);
    if (bl && u->base[bl - 1] == '/') u->base[bl - 1] = '\0';
    return 0;
}

int tkp_url_encode(const char *s, char *out, size_t n)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t k = 0;
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        int plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '-' || c == '_' || c == '.' || c == '~';
        if (k + (plain ? 1 : 3) >= n) return -1;
        if (plain) {
            out[k++] = (char)c;
        } else {
            out[k++] = '%';
            out[k++] = hex[c >> 4];
            out[k++] = hex[c & 15];
        }
    }
    out[k] = '\0';
    return 0;
}

static int dial(const struct tkp_url *u, int *fd, char *why, size_t whylen)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai, *a;
    int rc = getaddrinfo(u->host, u->port, &hints, &ai);
    if (rc) return tkp_why(why, whylen, TKP_ERR_IO, "%s: %s", u->host, gai_strerror(rc));
    int e = 0;
    *fd = -1;
    for (a = ai; a && *fd < 0; a = a->ai_next) {
        int s = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (s < 0) continue;
        struct timeval tv = {TKP_HTTP_TIMEOUT_S, 0};
        setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
        if (!connect(s, a->ai_addr, a->ai_addrlen))
            *fd = s;
        else
            e = errno, close(s);
    }
    freeaddrinfo(ai);
    if (*fd < 0) return tkp_why(why, whylen, TKP_ERR_IO, "%s", strerror(e ? e : ECONNREFUSED));
    return 0;
}

static int send_all(int fd, const void *p, size_t n)
{
    const char *b = p;
    while (n) {
        ssize_t w = send(fd, b, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        b += w, n -= (size_t)w;
    }
    return 0;
}

/* Decodes a chunked body in place; returns its length. */
static size_t unchunk(char *b, size_t n)
{
    size_t in = 0, out = 0;
    while (in < n) {
        char *end;
        unsigned long len = strtoul(b + in, &end, 16);
        char *crlf = strstr(end, "\r\n");
        if (!crlf || !len) break;
        in = (size_t)(crlf + 2 - b);
        if (in + len > n) len = n - in;
        memmove(b + out, b + in, len);
        out += len, in += len + 2;
    }
    b[out] = '\0';
    return out;
}

int tkp_http_post(const struct tkp_url *u, const char *path_query, const char *headers,
                  const void *body, size_t n, int *status, char **reply, char *why, size_t whylen)
{
    int fd, err;
    size_t hl = strlen(path_query) + (headers ? strlen(headers) : 0) + 1024;
    char *head = malloc(hl);
    *reply = NULL;
    if (!head) return tkp_why(why, whylen, TKP_ERR_NOMEM, "out of memory");
    if ((err = dial(u, &fd, why, whylen))) {
        free(head);
        return err;
    }
    snprintf(head, hl,
             "POST %s%s HTTP/1.1\r\nHost: %s:%s\r\nConnection: close\r\n"
             "Content-Length: %zu\r\n%s\r\n",
             u->base, path_query, u->host, u->port, n, headers ? headers : "");
    int bad = send_all(fd, head, strlen(head)) || (n && send_all(fd, body, n));
    free(head);
    if (bad) {
        err = tkp_why(why, whylen, TKP_ERR_IO, "sending: %s", strerror(errno));
        close(fd);
        return err;
    }
    size_t len = 0, cap = 65536;
    char *b = malloc(cap + 1);
    for (ssize_t r; b;) {
        if (len == cap) {
            char *q = cap < TKP_HTTP_REPLY_MAX ? realloc(b, cap * 2 + 1) : NULL;
            if (!q) break;
            b = q, cap *= 2;
        }
        r = recv(fd, b + len, cap - len, 0);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            err = tkp_why(why, whylen, TKP_ERR_IO, "reading the reply: %s", strerror(errno));
            break;
        }
        if (r == 0) break;
        len += (size_t)r;
    }
    close(fd);
    if (!b) return tkp_why(why, whylen, TKP_ERR_NOMEM, "out of memory");
    b[len] = '\0';
    char *sep = strstr(b, "\r\n\r\n");
    if (!err && (!sep || sscanf(b, "HTTP/1.%*d %d", status) != 1))
        err = tkp_why(why, whylen, TKP_ERR_IO, "%s",
                      len ? "not an HTTP reply" : "connection closed without a reply");
    if (err) {
        free(b);
        return err;
    }
    *sep = '\0';
    int chunked = strstr(b, "chunked") != NULL; /* Transfer-Encoding: chunked */
    size_t bl = len - (size_t)(sep + 4 - b);
    memmove(b, sep + 4, bl + 1);
    if (chunked) unchunk(b, bl);
    *reply = b;
    return 0;
}
