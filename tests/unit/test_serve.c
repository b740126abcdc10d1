/*
 * The agent's log endpoint (src/agent/serve.c) on a loopback port of its
 * own, spoken to over plain sockets: the bearer key (missing, wrong, a
 * prefix of the right one, the right one with more behind it: 401), the
 * offset and limit arguments parsed strictly (anything but digits in
 * range: 400 naming the argument), and good requests (200 with the log's
 * bytes and its size). Every read is bounded by a socket timeout.
 */
#include "agent.h"

#include "allot/common.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include <cmocka.h>

#define LOG_TEXT "hello from task 0\n"

struct fixture {
    char dir[64];      /* the temporary logs folder */
    char url[512];     /* http://127.0.0.1:PORT */
    char key[80];      /* the bearer the endpoint wants */
    struct serve *srv; /* owned */
    unsigned short port;
};

struct answer {
    int status;      /* -1: no answer */
    char head[2048]; /* the status line and headers */
    char body[4096];
    size_t body_len;
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));
    char path[256];
    FILE *fp;

    assert_non_null(f);
    allot_strlcpy(f->dir, "/tmp/allot-test-serve-XXXXXX", sizeof(f->dir));
    assert_non_null(mkdtemp(f->dir));
    allot_fmt(path, sizeof(path), "%s/7", f->dir);
    assert_int_equal(mkdir(path, 0755), 0);
    allot_fmt(path, sizeof(path), "%s/7/task-0.log", f->dir);
    fp = fopen(path, "w");
    assert_non_null(fp);
    fputs(LOG_TEXT, fp);
    fclose(fp);
    f->srv = serve_start("127.0.0.1:0", f->dir, f->url, sizeof(f->url), f->key, sizeof(f->key));
    assert_non_null(f->srv);
    assert_int_equal(strlen(f->key), 48);
    const char *colon = strrchr(f->url, ':');
    assert_non_null(colon);
    f->port = (unsigned short)strtoul(colon + 1, NULL, 10);
    assert_true(f->port > 0);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    char path[256];

    serve_stop(f->srv);
    allot_fmt(path, sizeof(path), "%s/7/task-0.log", f->dir);
    unlink(path);
    allot_fmt(path, sizeof(path), "%s/7", f->dir);
    rmdir(path);
    rmdir(f->dir);
    free(f);
    return 0;
}

/* GET `target` with Authorization `auth` (NULL: none); the answer. */
static void get(const struct fixture *f, const char *target, const char *auth, struct answer *a)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(f->port)};
    struct timeval tv = {.tv_sec = 10}; /* bounded: the endpoint answers at once */
    char req[1024], buf[8192];
    size_t got = 0;
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    memset(a, 0, sizeof(*a));
    a->status = -1;
    assert_true(fd >= 0);
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    int n = allot_fmt(req, sizeof(req),
                      "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n%s%s%s"
                      "Connection: close\r\n\r\n",
                      target, auth ? "Authorization: " : "", auth ? auth : "", auth ? "\r\n" : "");
    assert_true(n > 0 && (size_t)n < sizeof(req));
    assert_int_equal(write(fd, req, (size_t)n), n);
    for (;;) {
        ssize_t r = read(fd, buf + got, sizeof(buf) - 1 - got);
        if (r <= 0)
            break;
        got += (size_t)r;
        if (got == sizeof(buf) - 1)
            break;
    }
    close(fd);
    buf[got] = '\0';
    char *end = strstr(buf, "\r\n\r\n");
    assert_non_null(end);
    assert_int_equal(sscanf(buf, "HTTP/1.%*d %d", &a->status), 1);
    size_t hl = (size_t)(end - buf);
    assert_true(hl < sizeof(a->head));
    memcpy(a->head, buf, hl);
    a->body_len = got - hl - 4;
    assert_true(a->body_len < sizeof(a->body));
    memcpy(a->body, end + 4, a->body_len);
}

static void test_key(void **state)
{
    struct fixture *f = *state;
    struct answer a;
    char auth[200];

    get(f, "/logs/7/0", NULL, &a);
    assert_int_equal(a.status, 401);
    /* the right length, one digit off */
    allot_fmt(auth, sizeof(auth), "Bearer %s", f->key);
    auth[7] = auth[7] == '0' ? '1' : '0';
    get(f, "/logs/7/0", auth, &a);
    assert_int_equal(a.status, 401);
    /* a prefix of the key, the key with more behind it, none, another scheme */
    char wrong[4][200];
    allot_fmt(wrong[0], sizeof(wrong[0]), "Bearer %.47s", f->key);
    allot_fmt(wrong[1], sizeof(wrong[1]), "Bearer %s0", f->key);
    allot_fmt(wrong[2], sizeof(wrong[2]), "Bearer ");
    allot_fmt(wrong[3], sizeof(wrong[3]), "Basic %s", f->key);
    for (size_t i = 0; i < sizeof(wrong) / sizeof(wrong[0]); i++) {
        get(f, "/logs/7/0", wrong[i], &a);
        if (a.status != 401)
            fail_msg("%s: %d, not 401", wrong[i], a.status);
    }
    /* a bad argument with a bad key: the key is looked at first */
    allot_fmt(auth, sizeof(auth), "Bearer %.47sx", f->key);
    get(f, "/logs/7/0?offset=abc", auth, &a);
    assert_int_equal(a.status, 401);
}

static void test_bad_arguments(void **state)
{
    static const struct {
        const char *query, *names;
    } bad[] = {
        {"offset=abc", "offset"},
        {"offset=-1", "offset"},
        {"offset=12x", "offset"},
        {"offset=+1", "offset"},
        {"offset=", "offset"},
        {"offset=99999999999999999999", "offset"},
        {"limit=0", "limit"},
        {"limit=12x", "limit"},
        {"limit=abc", "limit"},
        {"limit=-5", "limit"},
        {"limit=1048577", "limit"},
        {"limit=99999999999999999999", "limit"},
        {"offset=0&limit=1e3", "limit"},
    };
    struct fixture *f = *state;
    struct answer a;
    char auth[200], target[200];

    allot_fmt(auth, sizeof(auth), "Bearer %s", f->key);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        allot_fmt(target, sizeof(target), "/logs/7/0?%s", bad[i].query);
        get(f, target, auth, &a);
        if (a.status != 400 || !strstr(a.body, bad[i].names))
            fail_msg("%s: want 400 naming %s, got %d %s", bad[i].query, bad[i].names, a.status,
                     a.body);
    }
}

static void test_good(void **state)
{
    struct fixture *f = *state;
    struct answer a;
    char auth[200], size[64];

    allot_fmt(auth, sizeof(auth), "Bearer %s", f->key);
    allot_fmt(size, sizeof(size), "X-Allot-Log-Size: %zu", strlen(LOG_TEXT));
    get(f, "/logs/7/0", auth, &a);
    assert_int_equal(a.status, 200);
    assert_int_equal(a.body_len, strlen(LOG_TEXT));
    assert_memory_equal(a.body, LOG_TEXT, strlen(LOG_TEXT));
    assert_non_null(strcasestr(a.head, size));
    get(f, "/logs/7/0?offset=6&limit=4", auth, &a);
    assert_int_equal(a.status, 200);
    assert_int_equal(a.body_len, 4);
    assert_memory_equal(a.body, "from", 4);
    get(f, "/logs/7/0?offset=0006&limit=1048576", auth, &a); /* leading zeros are digits */
    assert_int_equal(a.status, 200);
    assert_int_equal(a.body_len, strlen(LOG_TEXT) - 6);
    get(f, "/logs/7/0?offset=1000", auth, &a); /* past the end: nothing, and the size */
    assert_int_equal(a.status, 200);
    assert_int_equal(a.body_len, 0);
    assert_non_null(strcasestr(a.head, size));
    get(f, "/logs/7/1", auth, &a);
    assert_int_equal(a.status, 404);
    get(f, "/logs/7/0/x", auth, &a);
    assert_int_equal(a.status, 404);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_key, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_arguments, setup, teardown),
        cmocka_unit_test_setup_teardown(test_good, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
