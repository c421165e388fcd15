/* test_admin.c - the admin socket (src/admin, docs/operations.md): the
 * request parser; the socket's file (mode 0600, a stale one replaced, a
 * live one or a plain file refused); the pools document (names, counts,
 * no password from a connection string, the keyword tether_admin_socket);
 * the control requests; a peer of another user refused (forked, its uid
 * set to nobody's); a client sending one byte a second cut off without
 * holding anyone up; 1,000 clients at once (the next one refused) and the
 * pool's throughput meanwhile against a run without the socket (printed,
 * not judged).
 *
 * The control checks need the runtime-control API of the pool (the
 * ops-pool branch): where tether_pool_pause answers TETHER_ESTATE (the
 * stand-ins of src/pool/ops_pending.c), they check the error answers and
 * print "SKIP" for the rest; after the merge they run whole, unedited. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "../support/needs_pq.h"
#include "../support/sim_pool.h"
#include "admin.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char dir[64];
static char path[128];

static int64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int connect_to(const char *p) {
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(p) >= sizeof(sa.sun_path))
        return -1;
    memcpy(sa.sun_path, p, strlen(p) + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Reads one line (answer) within ms into buf; returns its length, 0 when
 * the server closed the socket, -1 on timeout. */
static ssize_t read_line(int fd, char *buf, size_t cap, int ms) {
    size_t len = 0;
    int64_t end = now_ms() + ms;
    while (len + 1 < cap) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int64_t left = end - now_ms();
        if (left <= 0 || poll(&p, 1, (int)left) <= 0)
            return -1;
        ssize_t k = recv(fd, buf + len, cap - len - 1, 0);
        if (k <= 0)
            return len ? (ssize_t)len : 0;
        len += (size_t)k;
        buf[len] = '\0';
        if (memchr(buf, '\n', len))
            return (ssize_t)len;
    }
    return (ssize_t)len;
}

/* ask sends req and returns the answer (static buffer). */
static const char *ask(const char *req) {
    static char buf[1 << 16];
    int fd = connect_to(path);
    assert_true(fd >= 0);
    assert_int_equal(send(fd, req, strlen(req), MSG_NOSIGNAL),
                     (ssize_t)strlen(req));
    ssize_t n = read_line(fd, buf, sizeof(buf), 5000);
    close(fd);
    if (n <= 0)
        fail_msg("no answer to %s", req);
    return buf;
}

static int setup(void **state) {
    (void)state;
    snprintf(dir, sizeof(dir), "/tmp/tether-admin-XXXXXX");
    assert_non_null(mkdtemp(dir));
    chmod(dir, 0711); /* another user may reach the socket by its mode */
    snprintf(path, sizeof(path), "%s/admin.sock", dir);
    signal(SIGPIPE, SIG_IGN);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    tether_admin_stop();
    unlink(path);
    rmdir(dir);
    return 0;
}

/* ---- the parser ---------------------------------------------------------- */

static void test_parse(void **state) {
    (void)state;
    tether__admin_req r;
    char why[160];
#define OK(s)                                                                  \
    assert_int_equal(tether__admin_parse(s, strlen(s), &r, why, 160), 0)
#define BAD(s)                                                                 \
    assert_int_equal(tether__admin_parse(s, strlen(s), &r, why, 160), -1)
    OK("pools");
    assert_int_equal(r.verb, TETHER__ADMIN_POOLS);
    OK("pools\r");
    OK("ping");
    OK("pause app db");
    assert_int_equal(r.verb, TETHER__ADMIN_PAUSE);
    assert_string_equal(r.name, "app db");
    OK("pause-close-idle x");
    assert_int_equal(r.verb, TETHER__ADMIN_PAUSE_IDLE);
    OK("resize my pool 2 10");
    assert_int_equal(r.verb, TETHER__ADMIN_RESIZE);
    assert_string_equal(r.name, "my pool");
    assert_int_equal(r.min, 2);
    assert_int_equal(r.max, 10);
    OK("resize p 0 1");
    BAD("resize p 3 2"); /* min above max */
    assert_non_null(strstr(why, "MIN"));
    BAD("resize p 0 0");
    BAD("resize p 1 100001");
    BAD("resize p -1 2");
    BAD("resize 1 2");
    BAD("resize p 2");
    BAD("evict");
    BAD("evict ");
    BAD("pools x");
    BAD("Pools");
    BAD("");
    BAD("pause a\tb");
    BAD("pause a\x7f");
    char longname[300];
    memset(longname, 'n', sizeof(longname));
    memcpy(longname, "evict ", 6);
    longname[6 + TETHER_POOL_NAME_MAX] = '\0';
    OK(longname);
    longname[6 + TETHER_POOL_NAME_MAX] = 'n';
    longname[7 + TETHER_POOL_NAME_MAX] = '\0';
    BAD(longname);
    assert_int_equal(tether__admin_parse("pause a\0b", 9, &r, why, 160), -1);
    /* the reason never quotes the request */
    BAD("unknown-secret-word");
    assert_null(strstr(why, "secret"));
#undef OK
#undef BAD
}

/* ---- the socket's file ----------------------------------------------------
 */

static void test_socket_file(void **state) {
    (void)state;
    tether_error err = {0};
    assert_int_equal(tether_admin_start(path, &err), 0);
    struct stat st;
    assert_int_equal(lstat(path, &st), 0);
    assert_true(S_ISSOCK(st.st_mode));
    assert_int_equal(st.st_mode & 0777, 0600);
    assert_int_equal(tether_admin_start(path, &err), 0); /* again: 0 */
    assert_string_equal(ask("ping\n"), "ok\n");
    /* a live socket of another process (here: a listener of our own) */
    char other[160];
    snprintf(other, sizeof(other), "%s/other.sock", dir);
    int l = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    memcpy(sa.sun_path, other, strlen(other) + 1);
    assert_int_equal(bind(l, (struct sockaddr *)&sa, sizeof(sa)), 0);
    assert_int_equal(listen(l, 1), 0);
    assert_int_equal(tether_admin_start(other, &err), TETHER_ESTATE);
    assert_non_null(strstr(err.message, "in use"));
    close(l); /* now stale: replaced */
    assert_int_equal(tether_admin_start(other, &err), 0);
    /* a plain file is never removed */
    char plain[160];
    snprintf(plain, sizeof(plain), "%s/plain", dir);
    close(open(plain, O_CREAT | O_WRONLY, 0600));
    assert_int_equal(tether_admin_start(plain, &err), TETHER_EINVAL);
    assert_non_null(strstr(err.message, "not a socket"));
    assert_int_equal(access(plain, F_OK), 0);
    unlink(plain);
    char longp[200];
    memset(longp, 'x', sizeof(longp));
    longp[199] = '\0';
    assert_int_equal(tether_admin_start(longp, &err), TETHER_EINVAL);
    assert_int_equal(tether_admin_start("", &err), TETHER_EINVAL);
    /* a child of fork that exits leaves the parent's socket alone */
    pid_t pid = fork();
    if (pid == 0)
        exit(0); /* atexit handlers run */
    waitpid(pid, NULL, 0);
    assert_int_equal(access(path, F_OK), 0);
    assert_string_equal(ask("ping\n"), "ok\n");
    tether_admin_stop(); /* both closed, their files gone */
    assert_int_equal(access(path, F_OK), -1);
    assert_int_equal(access(other, F_OK), -1);
}

/* ---- the pools document and the control requests ------------------------ */

static void named_pool(sim_pool *f, const char *name, int max) {
    tether_sim_opts so;
    tether_pool_opts po;
    sim_pool_opts(f, -1, &so, &po);
    po.max_size = max;
    po.name = name;
    sim_pool_open(f, &so, &po);
}

static void test_pools_document(void **state) {
    (void)state;
    tether_error err = {0};
    sim_pool a, b;
    named_pool(&a, "alpha", 4);
    named_pool(&b, "be\"ta", 2);
    assert_int_equal(tether_admin_start(path, &err), 0);
    tether_lease *l = sim_pool_acquire(a.pool);
    const char *doc = ask("pools\n");
    printf("pools: %.300s...\n", doc);
    assert_true(!strncmp(doc, "{\"pools\":[", 10));
    assert_non_null(strstr(doc, "{\"name\":\"alpha\",\"size\":1,\"in_use\":1,"
                                "\"idle\":0,"));
    assert_non_null(strstr(doc, "\"name\":\"be\\\"ta\""));
    assert_non_null(strstr(doc, "\"waiting\":0"));
    assert_non_null(strstr(doc, "\"timeouts\":0"));
    assert_non_null(strstr(doc, "\"breaker\":\"closed\""));
    assert_non_null(strstr(doc, "\"held\":["));
    assert_string_equal(doc + strlen(doc) - 3, "]}\n");
    assert_string_equal(ask("evict nosuch\n"), "error: no pool of that name\n");
    assert_true(!strncmp(ask("bogus\n"), "error: unknown request", 22));
    tether_lease_release(l);
    /* the pools are gone from it once destroyed */
    sim_pool_close(&b);
    assert_null(strstr(ask("pools\n"), "be\\\"ta"));
    sim_pool_close(&a);
    assert_string_equal(ask("pools\n"), "{\"pools\":[]}\n");
    tether_admin_stop();
}

/* The control requests: the answers, and what they did to the pool. */
static void test_control(void **state) {
    (void)state;
    tether_error err = {0};
    sim_pool a;
    named_pool(&a, "ctl pool", 4);
    assert_int_equal(tether_admin_start(path, &err), 0);
    tether_lease *l[3];
    for (int i = 0; i < 3; i++)
        l[i] = sim_pool_acquire(a.pool);
    for (int i = 0; i < 3; i++)
        tether_lease_release(l[i]); /* 3 idle */
    if (tether_pool_paused(a.pool) == TETHER_ESTATE) {
        /* src/pool/ops_pending.c: the API is not in this build */
        assert_true(!strncmp(ask("pause ctl pool\n"), "error: ", 7));
        assert_true(!strncmp(ask("resize ctl pool 0 2\n"), "error: ", 7));
        assert_true(!strncmp(ask("evict ctl pool\n"), "error: ", 7));
        assert_null(strstr(ask("pools\n"), "\"paused\":true"));
        printf("SKIP: pause, resume, resize, evict and reconnect through the "
               "socket need the pool's runtime control (the ops-pool "
               "branch); only their error answers were checked\n");
    } else {
        tether_pool_metrics m;
        assert_string_equal(ask("pause ctl pool\n"), "ok\n");
        assert_int_equal(tether_pool_paused(a.pool), 1);
        assert_non_null(strstr(ask("pools\n"), "\"paused\":true"));
        tether_lease *x = NULL;
        assert_int_equal(tether_pool_acquire(a.pool, 50, &x, &err),
                         TETHER_ETIMEDOUT); /* paused: waits, times out */
        assert_string_equal(ask("resume ctl pool\n"), "ok\n");
        assert_int_equal(tether_pool_paused(a.pool), 0);
        x = sim_pool_acquire(a.pool);
        tether_lease_release(x);
        assert_string_equal(ask("resize ctl pool 0 2\n"), "ok\n");
        tether_pool_metrics_get(a.pool, &m);
        assert_int_equal(m.max_size, 2);
        assert_true(m.total <= 2);
        assert_true(!strncmp(ask("evict ctl pool\n"), "ok ", 3));
        tether_pool_metrics_get(a.pool, &m);
        assert_int_equal(m.idle, 0);
        assert_string_equal(ask("reconnect ctl pool\n"), "ok\n");
        assert_string_equal(ask("pause-close-idle ctl pool\n"), "ok\n");
        assert_string_equal(ask("resume ctl pool\n"), "ok\n");
    }
    sim_pool_close(&a);
    tether_admin_stop();
}

/* tether_pool_open with tether_admin_socket opens the socket; the
 * document never carries the string's password. */
static void test_keyword(void **state) {
    (void)state;
    NEEDS_PQ_KEYWORDS(); /* user, dbname, password: the pq driver's */
    char ci[512];
    snprintf(ci, sizeof(ci),
             "host=127.0.0.1 port=1 user=u dbname=d password=sekret-pw "
             "tether_pool_min=0 tether_admin_socket=%s",
             path);
    tether_pool *p = NULL;
    tether_error err = {0};
    assert_int_equal(tether_pool_open(&p, ci, NULL, NULL, &err), 0);
    const char *doc = ask("pools\n");
    printf("keyword pool: %.200s\n", doc);
    assert_non_null(strstr(doc, "\"host\":\"127.0.0.1\",\"port\":1"));
    assert_null(strstr(doc, "sekret"));
    tether_pool_destroy(p);
    /* a bad path is an error naming the keyword; no pool is left */
    assert_int_equal(tether_pool_open(&p,
                                      "host=127.0.0.1 tether_admin_socket="
                                      "/nonexistent-dir/x.sock",
                                      NULL, NULL, &err),
                     TETHER_EIO);
    assert_non_null(strstr(err.message, "tether_admin_socket"));
    assert_null(p);
    tether_admin_stop();
}

/* ---- hostile clients ------------------------------------------------------
 */

static char logged[4096];
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static void capture(void *ctx, tether_log_level level, const char *msg) {
    (void)ctx, (void)level;
    pthread_mutex_lock(&log_lock);
    strncat(logged, msg, sizeof(logged) - strlen(logged) - 2);
    strcat(logged, "\n");
    pthread_mutex_unlock(&log_lock);
}

/* A child with nobody's uid connects: by the file's mode it cannot; with
 * the mode opened wide (a mistake), SO_PEERCRED refuses it. */
static int child_connects(void) {
    pid_t pid = fork();
    if (pid == 0) {
        if (setresgid(65534, 65534, 65534) || setresuid(65534, 65534, 65534))
            _exit(9);
        int fd = connect_to(path);
        if (fd < 0)
            _exit(errno == EACCES ? 2 : 8); /* 2: refused by the mode */
        char buf[256];
        if (send(fd, "ping\n", 5, MSG_NOSIGNAL) < 0)
            _exit(4); /* closed already: refused just as well */
        ssize_t n = read_line(fd, buf, sizeof(buf), 3000);
        _exit(n == 0 ? 4 : n > 0 ? 5 : 6); /* 4: closed without an answer */
    }
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void test_other_user_refused(void **state) {
    (void)state;
    if (geteuid() != 0) {
        printf("SKIP: another user's connection needs root to become one\n");
        return;
    }
    tether_error err = {0};
    tether_set_log(capture, NULL, TETHER_LOG_WARN);
    assert_int_equal(tether_admin_start(path, &err), 0);
    int rc = child_connects();
    printf("nobody, socket mode 0600: child exit %d (2: EACCES)\n", rc);
    assert_int_equal(rc, 2);
    chmod(path, 0666);
    rc = child_connects();
    printf("nobody, socket mode 0666: child exit %d (4: closed, no answer)\n",
           rc);
    assert_int_equal(rc, 4);
    assert_string_equal(ask("ping\n"), "ok\n"); /* root still served */
    tether_admin_stop();
    tether_set_log(NULL, NULL, TETHER_LOG_ERROR);
    printf("log: %s", logged);
    assert_non_null(strstr(logged, "refused a client of uid 65534"));
}

/* One byte a second: cut off once its request is 2 s old, with no answer;
 * meanwhile another client and the pool are served at once. */
static void test_slow_client(void **state) {
    (void)state;
    tether_error err = {0};
    sim_pool a;
    named_pool(&a, "slow", 2);
    assert_int_equal(tether_admin_start(path, &err), 0);
    int fd = connect_to(path);
    assert_true(fd >= 0);
    int64_t t0 = now_ms(), closed_at = -1;
    const char *req = "pools\n";
    int64_t worst_ping = 0, worst_acquire = 0;
    for (int i = 0; i < 6 && closed_at < 0; i++) {
        if (send(fd, req + i, 1, MSG_NOSIGNAL) != 1) {
            closed_at = now_ms() - t0;
            break;
        }
        for (int k = 0; k < 10; k++) { /* the second, in tenths */
            int64_t s = now_ms();
            assert_string_equal(ask("ping\n"), "ok\n");
            tether_lease *l = sim_pool_acquire(a.pool);
            tether_lease_release(l);
            int64_t took = now_ms() - s;
            if (took > worst_ping)
                worst_ping = took;
            worst_acquire = worst_acquire > took ? worst_acquire : took;
            char c;
            ssize_t r = recv(fd, &c, 1, MSG_DONTWAIT);
            if (r == 0) {
                closed_at = now_ms() - t0;
                break;
            }
            assert_true(r < 0); /* never an answer */
            usleep(100000);
        }
    }
    close(fd);
    printf("slow client: closed after %lld ms (bytes sent: one a second); "
           "another client's ping + an acquire meanwhile: at most %lld ms\n",
           (long long)closed_at, (long long)worst_ping);
    assert_true(closed_at >= 1900 && closed_at < 4000);
    sim_pool_close(&a);
    tether_admin_stop();
}

/* ---- 1,000 clients ------------------------------------------------------- */

typedef struct load {
    tether_pool *pool;
    atomic_int stop;
    atomic_llong ops;
} load;

static void *worker(void *arg) {
    load *w = arg;
    tether_error err = {0};
    while (!atomic_load(&w->stop)) {
        tether_lease *l = NULL;
        if (tether_pool_acquire(w->pool, 1000, &l, &err) == 0) {
            tether_lease_release(l);
            atomic_fetch_add(&w->ops, 1);
        }
    }
    return NULL;
}

/* Acquires and releases per second over ms with 4 threads. */
static double throughput(tether_pool *p, int ms) {
    load w = {.pool = p};
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        pthread_create(&t[i], NULL, worker, &w);
    usleep((useconds_t)ms * 1000);
    atomic_store(&w.stop, 1);
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    return (double)atomic_load(&w.ops) * 1000.0 / ms;
}

#define NCLIENTS 1000

typedef struct crowd {
    int fd[NCLIENTS];
    atomic_int stop;
    long answers;
} crowd;

/* All clients ask "pools" again and again until stopped. */
static void *crowd_run(void *arg) {
    crowd *c = arg;
    static struct pollfd p[NCLIENTS];
    static char buf[8192];
    while (!atomic_load(&c->stop)) {
        for (int i = 0; i < NCLIENTS; i++)
            if (send(c->fd[i], "pools\n", 6, MSG_NOSIGNAL) != 6)
                return NULL;
        int left = NCLIENTS;
        for (int i = 0; i < NCLIENTS; i++)
            p[i] = (struct pollfd){.fd = c->fd[i], .events = POLLIN};
        while (left > 0 && poll(p, NCLIENTS, 5000) > 0)
            for (int i = 0; i < NCLIENTS; i++)
                if (p[i].revents) {
                    ssize_t k = recv(p[i].fd, buf, sizeof(buf), 0);
                    if (k <= 0)
                        return NULL;
                    if (buf[k - 1] == '\n') { /* answers are small here */
                        p[i].fd = -1;
                        left--;
                        c->answers++;
                    }
                }
        if (left)
            return NULL;
    }
    return NULL;
}

static void test_thousand_clients(void **state) {
    (void)state;
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    if (rl.rlim_cur < 4096) {
        rl.rlim_cur = rl.rlim_max < 4096 ? rl.rlim_max : 4096;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    if (rl.rlim_cur < 2 * NCLIENTS + 64) {
        printf("SKIP: RLIMIT_NOFILE %llu is too low for %d clients\n",
               (unsigned long long)rl.rlim_cur, NCLIENTS);
        return;
    }
    sim_pool a;
    named_pool(&a, "crowded", 4);
    double base = throughput(a.pool, 1000);
    tether_error err = {0};
    assert_int_equal(tether_admin_start(path, &err), 0);
    crowd *c = calloc(1, sizeof(*c));
    for (int i = 0; i < NCLIENTS; i++) {
        c->fd[i] = connect_to(path);
        assert_true(c->fd[i] >= 0);
    }
    /* each is served: one round of pings */
    char buf[64];
    for (int i = 0; i < NCLIENTS; i++)
        assert_int_equal(send(c->fd[i], "ping\n", 5, MSG_NOSIGNAL), 5);
    for (int i = 0; i < NCLIENTS; i++) {
        assert_int_equal(read_line(c->fd[i], buf, sizeof(buf), 10000), 3);
        assert_string_equal(buf, "ok\n");
    }
    /* the 1,001st is closed without an answer, and blocks nobody */
    int extra = connect_to(path);
    assert_true(extra >= 0);
    send(extra, "ping\n", 5, MSG_NOSIGNAL);
    assert_int_equal(read_line(extra, buf, sizeof(buf), 3000), 0);
    close(extra);
    pthread_t t;
    pthread_create(&t, NULL, crowd_run, c);
    double busy = throughput(a.pool, 1000);
    atomic_store(&c->stop, 1);
    pthread_join(t, NULL);
    printf("pool throughput, 4 threads, 1 s each: %.0f acquire+release/s "
           "without the socket, %.0f with %d clients asking for the pools "
           "document (%ld answers meanwhile)\n",
           base, busy, NCLIENTS, c->answers);
    assert_true(c->answers >= NCLIENTS);
    for (int i = 0; i < NCLIENTS; i++)
        close(c->fd[i]);
    free(c);
    sim_pool_close(&a);
    tether_admin_stop();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse),
        cmocka_unit_test(test_socket_file),
        cmocka_unit_test(test_pools_document),
        cmocka_unit_test(test_control),
        cmocka_unit_test(test_keyword),
        cmocka_unit_test(test_other_user_refused),
        cmocka_unit_test(test_slow_client),
        cmocka_unit_test(test_thousand_clients),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
