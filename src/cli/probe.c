/* probe.c - `tether probe [--driver pq|tcp] CONNINFO`: connect once with
 * the connection string's strategy and print every attempt (host, port,
 * phase, error class, elapsed) and the outcome, over PostgreSQL (pq, the
 * default) or plain TCP to any service (tcp: several servers, each with
 * several ports, "host=a,b port=6379|6380,7000"). Passwords never appear:
 * the connector's events and errors carry none. */
#include "cli.h"
#include "tether_driver.h"

#include <string.h>

static int json_mode;
static int attempts_seen; /* the highest attempt number an event named */

static void on_event(void *ctx, const tether_connect_event *ev) {
    (void)ctx;
    if ((ev->phase == TETHER_PHASE_FAIL || ev->phase == TETHER_PHASE_OK ||
         ev->phase == TETHER_PHASE_ROLE) &&
        ev->attempt > attempts_seen)
        attempts_seen = ev->attempt;
    if (json_mode) {
        printf("{\"attempt\":%d,\"host\":", ev->attempt);
        /* pauses: delay_ms says how long */
        cli_json_str(ev->host);
        printf(",\"port\":%d,\"phase\":\"%s\",\"class\":\"%s\",\"code\":",
               ev->port, tether_phase_name(ev->phase),
               tether_class_name(ev->cls));
        cli_json_str(ev->code ? tether_errname(ev->code) : "");
        printf(",\"role\":\"%s\",\"elapsed_ms\":%lld,\"budget_ms\":%lld,"
               "\"delay_ms\":%lld,\"message\":",
               tether_role_name(ev->role), (long long)ev->elapsed_ms,
               (long long)ev->budget_ms, (long long)ev->delay_ms);
        cli_json_str(ev->message);
        printf("}\n");
    } else if (ev->phase == TETHER_PHASE_PAUSE ||
               ev->phase == TETHER_PHASE_PROVISION) {
        printf("%8lld ms  %-9s %lld ms\n", (long long)ev->elapsed_ms,
               tether_phase_name(ev->phase), (long long)ev->delay_ms);
    } else {
        printf("%8lld ms  %-9s #%-3d %s:%d%s%s%s\n", (long long)ev->elapsed_ms,
               tether_phase_name(ev->phase), ev->attempt, ev->host, ev->port,
               ev->role ? " (" : "", ev->role ? tether_role_name(ev->role) : "",
               ev->role ? ")" : "");
        if (ev->code)
            printf("%14s%s, %s: %s\n", "", tether_errname(ev->code),
                   tether_class_name(ev->cls), ev->message);
    }
    fflush(stdout);
}

/* The keywords a connection string may hold, from the library's own
 * tables (tether_conninfo_keyword): tether's with a line each, the
 * drivers' by name. */
static void probe_keywords(FILE *f) {
    tether_keyword k;
    const char *reader = NULL;
    size_t col = 0;
    fprintf(f, "\nconnection-string keywords (docs/conninfo.md):\n");
    for (size_t i = 0; tether_conninfo_keyword(i, &k) == 0; i++) {
        int tethers =
            !strcmp(k.reader, "connector") || !strcmp(k.reader, "pool");
        if (!reader || strcmp(reader, k.reader)) {
            fprintf(f, "%s  read by %s:\n", col ? "\n" : "", k.reader);
            col = 0;
        }
        reader = k.reader;
        if (tethers) {
            fprintf(f, "    %-30s %s\n", k.name, k.desc);
            continue;
        }
        if (col + strlen(k.name) + 1 > 76) {
            fprintf(f, "\n");
            col = 0;
        }
        col += (size_t)fprintf(f, "%s%s", col ? " " : "    ", k.name);
    }
    if (col)
        fprintf(f, "\n");
}

static void probe_usage(FILE *f) {
    fprintf(f,
            "usage: tether probe [--driver pq|tcp] CONNINFO [--json]\n\n"
            "Connects once following the connection string's strategy, role "
            "target and\ntimeouts (docs/conninfo.md) and prints every "
            "attempt: host, port, phase, error\nclass and elapsed time, then "
            "the outcome. Exit status 0 when connected.\n\n"
            "  --driver pq|tcp   pq: PostgreSQL (default); tcp: a plain TCP "
            "connect to any\n"
            "                    service (host=a,b port=6379|6380,7000: each "
            "host and each\n"
            "                    of its ports in turn)\n"
            "  --json            one JSON object per attempt or pause, then "
            "the outcome\n");
    probe_keywords(f);
}

enum { OPT_JSON = 256, OPT_DRIVER };

static const struct option probe_opts[] = {
    {"json", no_argument, NULL, OPT_JSON},
    {"driver", required_argument, NULL, OPT_DRIVER},
    {NULL, 0, NULL, 0}};

typedef struct probe_args {
    const char *conninfo;
    const tether_driver *driver; /* NULL: pq */
} probe_args;

/* cli_opt_fn: --json, --driver, and the one connection string. */
static int take_opt(void *ctx, int opt, const char *v) {
    probe_args *a = ctx;
    const char **conninfo = &a->conninfo;
    if (opt == OPT_JSON)
        json_mode = 1;
    else if (opt == OPT_DRIVER && !strcmp(v, "tcp"))
        a->driver = tether_driver_tcp();
    else if (opt == OPT_DRIVER && !strcmp(v, "pq"))
        a->driver = NULL;
    else if (opt == OPT_DRIVER)
        return cli_usage_error("probe", "--driver: want pq or tcp");
    else if (*conninfo)
        /* not echoed: an unquoted "host=h password=p" arrives in pieces */
        return cli_usage_error("probe",
                               "one connection string only (quote it "
                               "whole; the second argument is not shown: "
                               "it may hold a password)");
    else
        *conninfo = v;
    return 0;
}

/* The outcome of the connect call that returned rc. The attempts are
 * err->attempts, or the count the events gave when higher: the race
 * strategy leaves err->attempts at 0 when it connects. */
static void print_outcome(int rc, const tether_error *err) {
    int n = err->attempts > attempts_seen ? err->attempts : attempts_seen;
    const char *s = n == 1 ? "" : "s";
    if (json_mode) {
        printf("{\"outcome\":\"%s\",\"attempts\":%d,\"elapsed_ms\":%lld,"
               "\"error\":",
               rc ? "fail" : "ok", n, (long long)err->elapsed_ms);
        cli_json_str(rc ? tether_errname(rc) : "");
        printf(",\"class\":\"%s\",\"message\":",
               tether_class_name(rc ? err->cls : TETHER_CLASS_NONE));
        cli_json_str(rc ? err->message : "");
        printf("}\n");
    } else if (rc) {
        printf("failed after %d attempt%s, %lld ms: %s (%s)\n", n, s,
               (long long)err->elapsed_ms, err->message,
               tether_class_name(err->cls));
    } else {
        printf("connected after %d attempt%s, %lld ms\n", n, s,
               (long long)err->elapsed_ms);
    }
}

int cli_probe(int argc, char **argv) {
    probe_args a = {NULL, NULL};
    if (cli_want_help(argc, argv)) {
        probe_usage(stdout);
        return CLI_OK;
    }
    if (cli_parse_opts("probe", argc, argv, probe_opts, take_opt, &a))
        return CLI_USAGE;
    if (!a.conninfo)
        return cli_usage_error("probe", "a connection string is required");
    tether_connector_opts o;
    tether_connector_opts_init(&o);
    o.conninfo = a.conninfo;
    o.driver = a.driver;
    o.on_event = on_event;
    tether_connector *c = NULL;
    tether_error err = {0};
    if (tether_connector_create(&c, &o, &err)) {
        fprintf(stderr, "tether probe: %s\n", err.message);
        return CLI_USAGE;
    }
    void *h = NULL;
    int rc = tether_connector_connect(c, &h, &err);
    print_outcome(rc, &err);
    tether_connector_close(c, h);
    tether_connector_destroy(c);
    return rc ? CLI_FAIL : CLI_OK;
}
