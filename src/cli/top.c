/* top.c - `tether top --socket PATH`: a live view of every pool of a
 * running process, read from its admin socket each second
 * (docs/operations.md): size, in use, idle, waiting, acquire p50/p99,
 * timeouts, breaker, pause, hosts and their roles, a routing pool's read
 * side, and the acquire sites holding leases longest. On a terminal it
 * clears the screen each time, fits the lines to its width and quits on q;
 * --once prints one view, --json the document itself (one line). */
#include "cli.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#define TIMEOUT_MS 3000 /* for an answer */

typedef struct top_args {
    const char *socket;
    int once, json;
} top_args;

static volatile sig_atomic_t stopped;
static void on_signal(int sig) {
    (void)sig;
    stopped = 1;
}

static void help(void) {
    printf(
        "usage: tether top --socket PATH [--once] [--json]\n\n"
        "A live view of every pool of a running process, read from its admin\n"
        "socket (TETHER_ADMIN_SOCKET, the keyword tether_admin_socket or\n"
        "tether_admin_start; docs/operations.md), refreshed every second:\n"
        "per pool its size, connections in use and idle, callers waiting,\n"
        "acquire p50/p99, timeouts, breaker, pause, hosts and roles, a\n"
        "routing pool's read side, and the acquire sites holding leases\n"
        "longest. On a terminal: q quits.\n\n"
        "options:\n"
        "  --socket PATH  the process's admin socket (required)\n"
        "  --once         print one view and exit\n"
        "  --json         print the pools document (JSON, one line) instead\n"
        "                 of the table: a pools array, each with name, size,\n"
        "                 in_use, idle, waiting, timeouts, breaker, held\n"
        "                 ({site, count, age_ms}) and more\n");
}

static int on_opt(void *ctx, int opt, const char *val) {
    top_args *a = ctx;
    switch (opt) {
    case 's':
        a->socket = val;
        return 0;
    case 'o':
        a->once = 1;
        return 0;
    case 'j':
        a->json = 1;
        return 0;
    default:
        return cli_usage_error("top", "unexpected argument '%s'", val);
    }
}

/* ---- the view ------------------------------------------------------------ */

/* txt is member key of o as a string, "?" when missing. */
static const char *txt(const cli_json *d, const cli_json *o, const char *key) {
    const char *s = cli_json_text(d, o, key);
    return s ? s : "?";
}

typedef struct screen {
    int cols;
    int tty;
} screen;

/* line prints one line cut to the screen's width. */
static void line(const screen *sc, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void line(const screen *sc, const char *fmt, ...) {
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    if (sc->cols > 0 && (int)strlen(buf) > sc->cols)
        buf[sc->cols] = '\0';
    fputs(buf, stdout);
    fputs(sc->tty ? "\033[K\r\n" : "\n", stdout);
}

/* A duration in microseconds, short: "<1us", "850us", "2.0ms", "1.5s". */
static const char *dur_us(double us, char *b, size_t cap) {
    if (us < 0)
        snprintf(b, cap, "-");
    else if (us < 1)
        snprintf(b, cap, "<1us");
    else if (us < 1000)
        snprintf(b, cap, "%.0fus", us);
    else if (us < 1e6)
        snprintf(b, cap, "%.1fms", us / 1e3);
    else
        snprintf(b, cap, "%.1fs", us / 1e6);
    return b;
}

/* An age in milliseconds, short: "<1ms", "850ms", "1.5s", "2.0m". */
static const char *dur_ms(double ms, char *b, size_t cap) {
    if (ms < 1)
        snprintf(b, cap, "<1ms");
    else if (ms < 1000)
        snprintf(b, cap, "%.0fms", ms);
    else if (ms < 60000)
        snprintf(b, cap, "%.1fs", ms / 1e3);
    else
        snprintf(b, cap, "%.1fm", ms / 6e4);
    return b;
}

static void show_hosts(const screen *sc, const cli_json *d, const cli_json *p) {
    const cli_json *hosts = cli_json_get(d, p, "hosts");
    char buf[512];
    size_t len = 0;
    const cli_json *h;
    for (int i = 0; (h = cli_json_at(d, hosts, i)) && len < sizeof(buf); i++) {
        const char *host = cli_json_text(d, h, "host");
        int port = (int)cli_json_num(d, h, "port", 0);
        char ps[16] = "";
        if (port)
            snprintf(ps, sizeof(ps), ":%d", port);
        len += (size_t)snprintf(
            buf + len, sizeof(buf) - len, "%s%s%s %s", i ? ", " : "",
            host && *host ? host : "(default)", ps, txt(d, h, "role"));
    }
    if (len)
        line(sc, "  hosts: %s", buf);
}

static void show_read(const screen *sc, const cli_json *d, const cli_json *p) {
    const char *rs = cli_json_text(d, p, "read_side");
    if (!rs)
        return;
    line(sc,
         "  read side %s: reads on standbys %.0f, on the primary %.0f "
         "(lagging %.0f), lag checks %.0f",
         rs, cli_json_num(d, p, "reads_standby", 0),
         cli_json_num(d, p, "reads_primary", 0),
         cli_json_num(d, p, "reads_lagging", 0),
         cli_json_num(d, p, "lag_checks", 0));
}

/* The adaptive limit's line (docs/pool.md, "Adaptive limit"). */
static void show_limit(const screen *sc, const cli_json *d, const cli_json *p) {
    const char *mode = cli_json_text(d, p, "limit_mode");
    if (!mode || strcmp(mode, "adaptive") != 0)
        return;
    line(sc,
         "  adaptive limit %.0f (%.0f..%.0f): hold %.2f ms, baseline %.2f "
         "ms; changes up %.0f, down %.0f, server full %.0f",
         cli_json_num(d, p, "limit", 0), cli_json_num(d, p, "limit_min", 0),
         cli_json_num(d, p, "limit_max", 0),
         cli_json_num(d, p, "hold_us", 0) / 1000.0,
         cli_json_num(d, p, "hold_base_us", 0) / 1000.0,
         cli_json_num(d, p, "limit_up", 0), cli_json_num(d, p, "limit_down", 0),
         cli_json_num(d, p, "limit_full", 0));
}

static void show_held(const screen *sc, const cli_json *d, const cli_json *p) {
    const cli_json *held = cli_json_get(d, p, "held");
    if (!cli_json_num(d, p, "held_known", 0)) {
        line(sc, "  held: (this process cannot tell acquire sites)");
        return;
    }
    const cli_json *h;
    for (int i = 0; i < 3 && (h = cli_json_at(d, held, i)); i++) {
        char a[16];
        const char *site = cli_json_text(d, h, "site");
        line(sc, "  %s %-28s %3.0f lease%s, oldest %s",
             i ? "     " : "held:", site && *site ? site : "(unknown site)",
             cli_json_num(d, h, "count", 0),
             cli_json_num(d, h, "count", 0) == 1 ? " " : "s",
             dur_ms(cli_json_num(d, h, "age_ms", 0), a, sizeof(a)));
    }
}

static void show(const screen *sc, const char *path, const cli_json *d) {
    const cli_json *pools = cli_json_get(d, d, "pools");
    int n = 0;
    while (cli_json_at(d, pools, n))
        n++;
    char when[32];
    time_t t = time(NULL);
    strftime(when, sizeof(when), "%H:%M:%S", localtime(&t));
    line(sc, "tether top - %s - %s - %d pool%s%s", path, when, n,
         n == 1 ? "" : "s", sc->tty ? " - q quits" : "");
    line(sc, "%s", "");
    /* The name column fits the longest name, within what the width leaves
     * (names are cut only on a terminal too narrow for them). */
    int longest = 4;
    const cli_json *p;
    for (int i = 0; (p = cli_json_at(d, pools, i)); i++) {
        int len = (int)strlen(txt(d, p, "name"));
        longest = len > longest ? len : longest;
    }
    int narrow = sc->cols > 0 && sc->cols < 100;
    int rest = narrow ? 44 : 71; /* the other columns' width */
    int w = longest;
    if (sc->cols > 0 && w > sc->cols - rest)
        w = sc->cols - rest < 8 ? 8 : sc->cols - rest;
    if (narrow)
        line(sc, "%-*s %4s %4s %4s %4s %7s %5s %-9s", w, "POOL", "SIZE", "USE",
             "IDLE", "WAIT", "P99", "TMOUT", "BREAKER");
    else
        line(sc, "%-*s %4s %4s %4s %4s %4s %4s %7s %7s %6s %-9s %-7s", w,
             "POOL", "SIZE", "USE", "IDLE", "WAIT", "MIN", "MAX", "P50", "P99",
             "TMOUT", "BREAKER", "STATE");
    for (int i = 0; (p = cli_json_at(d, pools, i)); i++) {
        char p50[16], p99[16];
        const char *name = txt(d, p, "name");
        const cli_json *paused = cli_json_get(d, p, "paused");
        const char *state = !paused || paused->type != CLI_JSON_BOOL ? "-"
                            : paused->num                            ? "paused"
                                          : "running";
        dur_us(cli_json_num(d, p, "acquire_p50_us", -1), p50, sizeof(p50));
        dur_us(cli_json_num(d, p, "acquire_p99_us", -1), p99, sizeof(p99));
        if (narrow)
            line(sc, "%-*.*s %4.0f %4.0f %4.0f %4.0f %7s %5.0f %-9s", w, w,
                 name, cli_json_num(d, p, "size", 0),
                 cli_json_num(d, p, "in_use", 0), cli_json_num(d, p, "idle", 0),
                 cli_json_num(d, p, "waiting", 0), p99,
                 cli_json_num(d, p, "timeouts", 0), txt(d, p, "breaker"));
        else
            line(sc,
                 "%-*.*s %4.0f %4.0f %4.0f %4.0f %4.0f %4.0f %7s %7s %6.0f "
                 "%-9s %-7s",
                 w, w, name, cli_json_num(d, p, "size", 0),
                 cli_json_num(d, p, "in_use", 0), cli_json_num(d, p, "idle", 0),
                 cli_json_num(d, p, "waiting", 0), cli_json_num(d, p, "min", 0),
                 cli_json_num(d, p, "max", 0), p50, p99,
                 cli_json_num(d, p, "timeouts", 0), txt(d, p, "breaker"),
                 state);
        show_hosts(sc, d, p);
        show_limit(sc, d, p);
        show_read(sc, d, p);
        show_held(sc, d, p);
    }
    if (n == 0)
        line(sc, "(no pool in the process yet)");
}

/* ---- the loop ------------------------------------------------------------ */

static struct termios saved;
static int raw_on;

static void raw_mode(int on) {
    if (on && !raw_on && tcgetattr(STDIN_FILENO, &saved) == 0) {
        struct termios t = saved;
        t.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
        t.c_cc[VMIN] = 0;
        t.c_cc[VTIME] = 0;
        raw_on = tcsetattr(STDIN_FILENO, TCSANOW, &t) == 0;
    } else if (!on && raw_on) {
        tcsetattr(STDIN_FILENO, TCSANOW, &saved);
        raw_on = 0;
    }
}

static int term_cols(void) {
    struct winsize ws;
    if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
        return ws.ws_col;
    return 0;
}

/* wait_key waits up to ms for a key on a terminal; 1 when q (or Q) came. */
static int wait_key(int ms, int tty_in) {
    struct pollfd p = {.fd = STDIN_FILENO, .events = POLLIN};
    if (!tty_in) {
        poll(NULL, 0, ms);
        return 0;
    }
    if (poll(&p, 1, ms) > 0) {
        char c;
        while (read(STDIN_FILENO, &c, 1) == 1)
            if (c == 'q' || c == 'Q')
                return 1;
    }
    return 0;
}

int cli_top(int argc, char **argv) {
    if (cli_want_help(argc, argv)) {
        help();
        return CLI_OK;
    }
    static const struct option opts[] = {{"socket", required_argument, 0, 's'},
                                         {"once", no_argument, 0, 'o'},
                                         {"json", no_argument, 0, 'j'},
                                         {0, 0, 0, 0}};
    top_args a = {0};
    int rc = cli_parse_opts("top", argc, argv, opts, on_opt, &a);
    if (rc)
        return rc;
    if (!a.socket)
        return cli_usage_error("top", "--socket PATH is required");
    char why[256];
    int fd = cli_admin_connect(a.socket, why, sizeof(why));
    if (fd < 0) {
        fprintf(stderr, "tether top: %s\n", why);
        return CLI_FAIL;
    }
    int tty = !a.once && !a.json && isatty(STDOUT_FILENO);
    int tty_in = tty && isatty(STDIN_FILENO);
    if (tty) {
        signal(SIGINT, on_signal);
        signal(SIGTERM, on_signal);
        raw_mode(tty_in);
        fputs("\033[?25l", stdout); /* the cursor hidden while we draw */
    }
    rc = CLI_OK;
    while (!stopped) {
        char *doc =
            cli_admin_request(fd, "pools\n", TIMEOUT_MS, why, sizeof(why));
        cli_json *d = doc ? cli_json_parse(doc) : NULL;
        if (!d) {
            if (tty)
                fputs("\033[H\033[2J", stdout);
            fprintf(stderr, "tether top: %s\n",
                    doc ? "the answer is not a pools document" : why);
            free(doc);
            rc = CLI_FAIL;
            break;
        }
        if (a.json) {
            puts(doc);
        } else {
            screen sc = {.cols = tty ? term_cols() : 0, .tty = tty};
            if (tty)
                fputs("\033[H", stdout);
            show(&sc, a.socket, d);
            if (tty)
                fputs("\033[J", stdout); /* what the last view left below */
        }
        fflush(stdout);
        free(d);
        free(doc);
        if (a.once || wait_key(1000, tty_in))
            break;
    }
    if (tty) {
        raw_mode(0);
        fputs("\033[?25h", stdout);
        fflush(stdout);
    }
    close(fd);
    return rc;
}
