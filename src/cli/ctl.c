/* ctl.c - `tether ctl --socket PATH pause|resume|resize|evict|reconnect
 * POOL [MIN MAX]`: one control request to a running process's pool through
 * its admin socket (docs/operations.md), the same as tether_pool_pause,
 * _resume, _resize, _evict_idle and _reconnect. Prints the answer; exit 0
 * on "ok", 1 on an error. */
#include "cli.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct ctl_args {
    const char *socket;
    int json, close_idle;
    const char *pos[4]; /* ACTION POOL [MIN MAX] */
    int npos;
} ctl_args;

static void help(void) {
    printf(
        "usage: tether ctl --socket PATH ACTION POOL [MIN MAX] [--close-idle] "
        "[--json]\n\n"
        "Controls a pool of a running process through its admin socket\n"
        "(docs/operations.md). ACTION is one of:\n"
        "  pause POOL          stop handing out connections (callers wait\n"
        "                      within their deadlines; leases come back)\n"
        "  resume POOL         end a pause\n"
        "  resize POOL MIN MAX set the pool's min and max sizes\n"
        "  evict POOL          close the idle connections now\n"
        "  reconnect POOL      retire every connection as it is released\n"
        "POOL is the pool's name as tether top shows it.\n\n"
        "options:\n"
        "  --socket PATH  the process's admin socket (required)\n"
        "  --close-idle   with pause: also close the idle connections\n"
        "  --json         print {\"ok\":true|false,\"answer\":\"...\"}\n");
}

static int on_opt(void *ctx, int opt, const char *val) {
    ctl_args *a = ctx;
    switch (opt) {
    case 's':
        a->socket = val;
        return 0;
    case 'j':
        a->json = 1;
        return 0;
    case 'c':
        a->close_idle = 1;
        return 0;
    default:
        if (a->npos == 4)
            return cli_usage_error("ctl", "unexpected argument '%s'", val);
        a->pos[a->npos++] = val;
        return 0;
    }
}

/* request builds the request line from the arguments; 0 or CLI_USAGE. */
static int request(const ctl_args *a, char *req, size_t cap) {
    static const char *const actions[] = {"pause", "resume", "resize", "evict",
                                          "reconnect"};
    if (a->npos < 2)
        return cli_usage_error("ctl", "want ACTION POOL (ACTION: pause, "
                                      "resume, resize, evict or reconnect)");
    const char *act = a->pos[0];
    size_t k = 0;
    while (k < 5 && strcmp(actions[k], act))
        k++;
    if (k == 5)
        return cli_usage_error("ctl",
                               "unknown action '%s' (want pause, resume, "
                               "resize, evict or reconnect)",
                               act);
    int resize = k == 2;
    if (a->npos != (resize ? 4 : 2))
        return resize ? cli_usage_error("ctl", "resize wants POOL MIN MAX")
                      : cli_usage_error("ctl", "unexpected argument '%s'",
                                        a->pos[2]);
    if (a->close_idle && k != 0)
        return cli_usage_error("ctl", "--close-idle goes with pause only");
    if (strchr(a->pos[1], '\n'))
        return cli_usage_error("ctl", "bad pool name: a newline");
    int mn = 0, mx = 0;
    if (resize && (cli_parse_count("ctl", "MIN", a->pos[2], 0, 100000, &mn) ||
                   cli_parse_count("ctl", "MAX", a->pos[3], 1, 100000, &mx)))
        return CLI_USAGE;
    if (resize && mn > mx)
        return cli_usage_error("ctl", "MIN (%d) is above MAX (%d)", mn, mx);
    int n = resize
                ? snprintf(req, cap, "resize %s %d %d\n", a->pos[1], mn, mx)
                : snprintf(req, cap, "%s %s\n",
                           a->close_idle ? "pause-close-idle" : act, a->pos[1]);
    if (n < 0 || (size_t)n >= cap)
        return cli_usage_error("ctl", "pool name too long");
    return 0;
}

int cli_ctl(int argc, char **argv) {
    if (cli_want_help(argc, argv)) {
        help();
        return CLI_OK;
    }
    static const struct option opts[] = {{"socket", required_argument, 0, 's'},
                                         {"json", no_argument, 0, 'j'},
                                         {"close-idle", no_argument, 0, 'c'},
                                         {0, 0, 0, 0}};
    ctl_args a = {0};
    int rc = cli_parse_opts("ctl", argc, argv, opts, on_opt, &a);
    if (rc)
        return rc;
    if (!a.socket)
        return cli_usage_error("ctl", "--socket PATH is required");
    char req[512], why[256];
    if ((rc = request(&a, req, sizeof(req))) != 0)
        return rc;
    int fd = cli_admin_connect(a.socket, why, sizeof(why));
    if (fd < 0) {
        fprintf(stderr, "tether ctl: %s\n", why);
        return CLI_FAIL;
    }
    char *ans = cli_admin_request(fd, req, 10000, why, sizeof(why));
    close(fd);
    if (!ans) {
        fprintf(stderr, "tether ctl: %s\n", why);
        return CLI_FAIL;
    }
    int ok = !strncmp(ans, "ok", 2);
    if (a.json) {
        printf("{\"ok\":%s,\"answer\":", ok ? "true" : "false");
        cli_json_str(ans);
        printf("}\n");
    } else {
        fprintf(ok ? stdout : stderr, "%s%s\n", ok ? "" : "tether ctl: ", ans);
    }
    free(ans);
    return ok ? CLI_OK : CLI_FAIL;
}
