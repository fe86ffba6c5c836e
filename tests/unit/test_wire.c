/* test_wire: FastCGI records out (fcgi/wire.c) on a socketpair: the records' bytes,
 * a full socket keeps the rest in order and never blocks, the end of a request, a
 * peer that left. wire.c uses no libfcgi, so the test includes it whole. */
#include "../../fcgi/wire.c"

#include <fcntl.h>
#include <sys/socket.h>

#include "test.h"

/* Read everything the peer fd has now (non-blocking) into b. */
static void slurp(int fd, buf_t *b)
{
    char tmp[65536];
    ssize_t n;
    while ((n = recv(fd, tmp, sizeof tmp, MSG_DONTWAIT)) > 0) buf_append(b, tmp, (size_t)n);
}

/* Decode FCGI records in b: the concatenated FCGI_STDOUT content into out; *ended 1
 * if an empty FCGI_STDOUT then FCGI_END_REQUEST closed it. Returns 0, or -1 if the
 * bytes are not whole records of request id reqid. */
static int decode(const buf_t *b, int reqid, buf_t *out, int *ended)
{
    size_t off = 0;
    int empty_seen = 0;
    *ended = 0;
    while (off + 8 <= b->len) {
        const unsigned char *h = (const unsigned char *)b->p + off;
        size_t len = (size_t)h[4] << 8 | h[5];
        if (h[0] != 1 || ((int)h[2] << 8 | h[3]) != reqid || off + 8 + len + h[6] > b->len) return -1;
        if (h[1] == FCGI_STDOUT && len == 0) empty_seen = 1;
        else if (h[1] == FCGI_STDOUT) buf_append(out, b->p + off + 8, len);
        else if (h[1] == FCGI_END_REQUEST && empty_seen && len == 8) *ended = 1;
        else return -1;
        off += 8 + len + h[6];
    }
    return off == b->len ? 0 : -1;
}

static void test_records(void)
{
    int sv[2];
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    wire_t w;
    wire_init(&w, sv[0], 258);
    CHECK_EQ_INT(wire_queue(&w, "Status: 200 OK\r\n\r\n", 18), 0);
    CHECK_EQ_UINT(wire_pending(&w), 8 + 18);
    /* More than one record's worth: cut at REC_MAX. */
    size_t n = 100000;
    char *data = malloc(n);
    for (size_t i = 0; i < n; i++) data[i] = (char)('a' + i % 26);
    CHECK_EQ_INT(wire_write(&w, data, n, 1), WIRE_DONE);
    CHECK_EQ_UINT(wire_pending(&w), 0);
    buf_t got, body;
    buf_init(&got, 0);
    buf_init(&body, 0);
    slurp(sv[1], &got);
    int ended;
    CHECK_EQ_INT(decode(&got, 258, &body, &ended), 0);
    CHECK(ended);
    CHECK_EQ_UINT(body.len, 18 + n);
    CHECK(body.len == 18 + n && memcmp(body.p + 18, data, n) == 0);
    /* Three STDOUT records with content, the empty one, END_REQUEST. */
    CHECK_EQ_UINT(got.len, 8 + 18 + 8 + REC_MAX + 8 + (n - REC_MAX) + 8 + 16);
    free(data);
    buf_free(&got);
    buf_free(&body);
    wire_free(&w);
    close(sv[0]);
    close(sv[1]);
}

static void test_full_socket(void)
{
    int sv[2];
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    int small = 4096;
    setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
    setsockopt(sv[1], SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    wire_t w;
    wire_init(&w, sv[0], 1);
    /* 2 MiB in pieces to a reader that reads nothing: never blocks, keeps the rest. */
    size_t piece = 200000, total = 0;
    char *data = malloc(piece);
    buf_t want;
    buf_init(&want, 0);
    int again = 0;
    for (int i = 0; i < 10; i++) {
        memset(data, 'A' + i, piece);
        int rc = wire_write(&w, data, piece, i == 9);
        CHECK(rc == WIRE_DONE || rc == WIRE_AGAIN);
        again |= rc == WIRE_AGAIN;
        buf_append(&want, data, piece);
        total += piece;
    }
    CHECK(again);
    CHECK(wire_pending(&w) > 0);
    CHECK_EQ_INT(wire_send(&w), WIRE_AGAIN);
    /* The reader drains; the writer sends the rest as the socket takes it. */
    buf_t got, body;
    buf_init(&got, 0);
    buf_init(&body, 0);
    for (int rounds = 0; rounds < 100000 && wire_pending(&w); rounds++) {
        slurp(sv[1], &got);
        CHECK(wire_send(&w) != WIRE_GONE);
    }
    slurp(sv[1], &got);
    CHECK_EQ_UINT(wire_pending(&w), 0);
    int ended;
    CHECK_EQ_INT(decode(&got, 1, &body, &ended), 0);
    CHECK(ended);
    CHECK_EQ_UINT(body.len, total);
    CHECK(body.len == total && memcmp(body.p, want.p, total) == 0);
    free(data);
    buf_free(&want);
    buf_free(&got);
    buf_free(&body);
    wire_free(&w);
    close(sv[0]);
    close(sv[1]);
}

static void test_gone(void)
{
    int sv[2];
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    close(sv[1]);
    wire_t w;
    wire_init(&w, sv[0], 1);
    CHECK_EQ_INT(wire_write(&w, "x", 1, 1), WIRE_GONE);
    CHECK_EQ_INT(wire_queue(&w, "y", 1), 0);
    CHECK_EQ_INT(wire_drain(&w, 100), WIRE_GONE);
    wire_free(&w);
    close(sv[0]);
}

int main(void)
{
    test_records();
    test_full_socket();
    test_gone();
    return TEST_MAIN_END();
}
