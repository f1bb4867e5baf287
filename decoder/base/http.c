/* tokprof decoder: a minimal HTTP/1.1 client and server (see http.h). One request per connection
 * ("Connection: close") both ways: the client's reply ends where the connection does (a
 * Content-Length reply is read to its length, a chunked one is decoded); the server closes after
 * each reply. */
#include "base/http.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
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

/* ---- server ---- */

enum { C_READ, C_WRITE, C_DRAIN };
/* After a reply: read what the client still sends, so that close() sends no RST over the reply. */
#define DRAIN_MS 1000

struct conn {
    int fd, state;
    uint64_t born_ms, deadline_ms;
    size_t len; /* request head bytes in req */
    char *out;  /* the reply (C_WRITE) */
    size_t out_len, out_off;
    char req[TKP_HTTPD_REQUEST_MAX + 1];
};

struct tkp_httpd {
    int lfd;
    size_t n;
    struct conn *c[TKP_HTTPD_CONNS];
    struct pollfd pf[TKP_HTTPD_CONNS + 1];
};

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

int tkp_httpd_new(int listen_fd, struct tkp_httpd **out)
{
    struct tkp_httpd *h = calloc(1, sizeof(*h));
    if (!h) return TKP_ERR_NOMEM;
    h->lfd = listen_fd;
    fcntl(listen_fd, F_SETFL, fcntl(listen_fd, F_GETFL) | O_NONBLOCK);
    *out = h;
    return 0;
}

size_t tkp_httpd_conns(const struct tkp_httpd *h)
{
    return h->n;
}

static void conn_close(struct tkp_httpd *h, size_t i)
{
    close(h->c[i]->fd);
    free(h->c[i]->out);
    free(h->c[i]);
    h->c[i] = h->c[--h->n];
}

static const char *reason(int status)
{
    switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 431: return "Request Header Fields Too Large";
    default: return "Internal Server Error";
    }
}

/* Makes c's reply (status, and for a GET the handler's body) and turns it to writing. */
static void reply(struct conn *c, int status, tkp_httpd_fn fn, void *arg, const char *path,
                  uint64_t now)
{
    char *body = NULL;
    size_t len = 0;
    const char *type = "text/plain; charset=utf-8";
    FILE *m = open_memstream(&body, &len);
    if (m && status == 200) status = fn(arg, path, m, &type);
    if (m && status != 200) fprintf(m, "%d %s\n", status, reason(status));
    if (!m || fclose(m)) {
        free(body);
        body = NULL, len = 0, status = 500;
    }
    char head[512];
    int hl = snprintf(head, sizeof(head),
                      "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n%s"
                      "Connection: close\r\n\r\n",
                      status, reason(status), type, len, status == 405 ? "Allow: GET\r\n" : "");
    c->out = malloc((size_t)hl + len);
    if (c->out) {
        memcpy(c->out, head, (size_t)hl);
        if (len) memcpy(c->out + hl, body, len);
        c->out_len = (size_t)hl + len;
    }
    free(body);
    c->out_off = 0;
    c->state = C_WRITE;
    uint64_t d = c->born_ms + TKP_HTTPD_CONN_MS;
    c->deadline_ms = status == 408 ? now + DRAIN_MS : d;
}

/* A whole request head in c->req: its request line decides the reply. */
static void request(struct conn *c, tkp_httpd_fn fn, void *arg, uint64_t now)
{
    char *sp = strchr(c->req, ' '), *target = sp ? sp + 1 : NULL;
    char *sp2 = target ? strchr(target, ' ') : NULL;
    char *eol = strpbrk(c->req, "\r\n");
    if (!sp || !sp2 || !eol || sp2 > eol || sp == c->req || target == sp2 ||
        strncmp(sp2 + 1, "HTTP/1.", 7)) {
        reply(c, 400, fn, arg, NULL, now);
        return;
    }
    *sp = *sp2 = '\0';
    reply(c, strcmp(c->req, "GET") ? 405 : 200, fn, arg, target, now);
}

/* Reads what c has; 0 to keep it, -1 to close it. */
static int on_read(struct conn *c, tkp_httpd_fn fn, void *arg, uint64_t now)
{
    for (;;) {
        char sink[4096];
        char *dst = c->state == C_READ ? c->req + c->len : sink;
        size_t room = c->state == C_READ ? TKP_HTTPD_REQUEST_MAX - c->len : sizeof(sink);
        ssize_t k = recv(c->fd, dst, room, 0);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -1;
        if (k == 0) return -1; /* the client is gone (or done, after a reply) */
        if (c->state != C_READ) continue;
        size_t from = c->len > 3 ? c->len - 3 : 0;
        c->len += (size_t)k;
        c->req[c->len] = '\0';
        if (strstr(c->req + from, "\r\n\r\n") || strstr(c->req + from, "\n\n")) {
            request(c, fn, arg, now);
            return 0;
        }
        if (c->len == TKP_HTTPD_REQUEST_MAX) {
            reply(c, 431, fn, arg, NULL, now);
            return 0;
        }
    }
}

/* Writes what c's client takes; 0 to keep it, -1 to close it. */
static int on_write(struct conn *c, uint64_t now)
{
    if (!c->out) return -1;
    while (c->out_off < c->out_len) {
        ssize_t k = send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -1;
        c->out_off += (size_t)k;
    }
    free(c->out);
    c->out = NULL;
    shutdown(c->fd, SHUT_WR);
    c->state = C_DRAIN;
    if (c->deadline_ms > now + DRAIN_MS) c->deadline_ms = now + DRAIN_MS;
    return 0;
}

/* Advances c as far as its socket allows; 0 to keep it, -1 to close it. */
static int advance(struct conn *c, tkp_httpd_fn fn, void *arg, uint64_t now)
{
    if (c->state != C_WRITE && on_read(c, fn, arg, now)) return -1;
    if (c->state == C_WRITE && on_write(c, now)) return -1;
    return 0;
}

static void accept_all(struct tkp_httpd *h, tkp_httpd_fn fn, void *arg, uint64_t now)
{
    for (int k = 0; k < 64; k++) {
        int fd = accept4(h->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) return;
        if (h->n == TKP_HTTPD_CONNS) {
            /* Full: the oldest connection still sending its request goes (a flood of idle
             * connections cannot lock a scraper out); when every one is being answered, the new
             * one waits for none. */
            size_t old = h->n;
            for (size_t i = 0; i < h->n; i++)
                if (h->c[i]->state == C_READ &&
                    (old == h->n || h->c[i]->born_ms < h->c[old]->born_ms))
                    old = i;
            if (old == h->n) {
                close(fd);
                continue;
            }
            conn_close(h, old);
        }
        struct conn *c = malloc(sizeof(*c));
        if (!c) {
            close(fd);
            return;
        }
        *c = (struct conn){.fd = fd, .state = C_READ, .born_ms = now};
        c->deadline_ms = now + TKP_HTTPD_HEADER_MS;
        h->c[h->n++] = c;
        if (advance(c, fn, arg, now)) conn_close(h, h->n - 1); /* its request may be here already */
    }
}

int tkp_httpd_poll(struct tkp_httpd *h, int timeout_ms, tkp_httpd_fn fn, void *arg)
{
    uint64_t now = now_ms();
    h->pf[0] = (struct pollfd){.fd = h->lfd, .events = POLLIN};
    for (size_t i = 0; i < h->n; i++) {
        const struct conn *c = h->c[i];
        short ev = c->state == C_WRITE ? POLLOUT : POLLIN;
        h->pf[i + 1] = (struct pollfd){.fd = c->fd, .events = ev};
        if (c->deadline_ms <= now) timeout_ms = 0;
        else if (timeout_ms < 0 || c->deadline_ms - now < (uint64_t)timeout_ms)
            timeout_ms = (int)(c->deadline_ms - now);
    }
    size_t n = h->n;
    int k = poll(h->pf, n + 1, timeout_ms);
    if (k < 0) return errno == EINTR ? 0 : TKP_ERR_IO;
    now = now_ms();
    /* From the last: closing i moves the last connection, already seen, into its place. */
    for (size_t i = n; i-- > 0;) {
        struct conn *c = h->c[i];
        if (h->pf[i + 1].revents && advance(c, fn, arg, now)) {
            conn_close(h, i);
            continue;
        }
        if (c->deadline_ms > now) continue;
        if (c->state != C_READ) {
            conn_close(h, i);
            continue;
        }
        reply(c, 408, fn, arg, NULL, now); /* no whole request in time */
        if (on_write(c, now)) conn_close(h, i);
    }
    if (h->pf[0].revents & POLLIN) accept_all(h, fn, arg, now);
    return 0;
}

void tkp_httpd_free(struct tkp_httpd *h)
{
    if (!h) return;
    while (h->n)
        conn_close(h, h->n - 1);
    free(h);
}
