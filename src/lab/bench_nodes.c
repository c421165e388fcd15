/* bench_nodes.c - the server side of `tether bench query --read-only`:
 * each node the connection string names is asked, on a connection of its
 * own (target any, not through the pool), for its role, its committed
 * transactions in this database (pg_stat_database.xact_commit) and the
 * bench's backends (pg_stat_activity by application_name), so that the
 * routing can be seen where it lands. */
#include "bench_nodes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Copies the key=value string ci into out without tether's keywords
 * (libpq refuses them). A value may be quoted ('...', \ escapes). */
static void strip_kv(const char *ci, char *out) {
    const char *p = ci;
    while (*p) {
        while (*p == ' ' || *p == '\t' || *p == '\n')
            p++;
        const char *start = p;
        while (*p && *p != '=')
            p++;
        if (*p == '=')
            p++;
        while (*p == ' ')
            p++;
        if (*p == '\'') {
            for (p++; *p && *p != '\''; p++)
                if (*p == '\\' && p[1])
                    p++;
            if (*p)
                p++;
        } else {
            while (*p && *p != ' ' && *p != '\t' && *p != '\n')
                p++;
        }
        if (strncmp(start, "tether_", 7) != 0) {
            strncat(out, start, (size_t)(p - start));
            strcat(out, " ");
        }
    }
}

/* The same for a URI: its tether_* query parameters left out. */
static void strip_uri(const char *ci, char *out) {
    const char *q = strchr(ci, '?');
    if (!q) {
        strcpy(out, ci);
        return;
    }
    strncat(out, ci, (size_t)(q - ci));
    char sep = '?';
    for (const char *p = q + 1; *p;) {
        size_t n = strcspn(p, "&");
        if (strncmp(p, "tether_", 7) != 0) {
            size_t len = strlen(out);
            out[len] = sep;
            out[len + 1] = '\0';
            strncat(out, p, n);
            sep = '&';
        }
        p += n + (p[n] == '&');
    }
}

/* Item i of a comma list into buf ("" when the list is shorter). */
static void list_item(const char *list, int i, char *buf, size_t cap) {
    buf[0] = '\0';
    if (!list)
        return;
    while (i-- > 0 && (list = strchr(list, ',')))
        list++;
    if (!list)
        return;
    size_t n = strcspn(list, ",");
    snprintf(buf, cap, "%.*s", (int)(n < cap ? n : cap - 1), list);
}

static int count_items(const char *s) {
    int n = s && *s ? 1 : 0;
    for (; s && *s; s++)
        n += *s == ',';
    return n;
}

int bench_nodes_find(const char *conninfo, bench_nodes *ns) {
    memset(ns, 0, sizeof(*ns));
    char *clean = calloc(1, strlen(conninfo) + 2);
    if (!clean)
        return -1;
    int uri = !strncmp(conninfo, "postgresql://", 13) ||
              !strncmp(conninfo, "postgres://", 11);
    (uri ? strip_uri : strip_kv)(conninfo, clean);
    char *msg = NULL;
    ns->opts = PQconninfoParse(clean, &msg);
    free(clean);
    PQfreemem(msg);
    if (!ns->opts)
        return -1;
    const char *hosts = NULL, *addrs = NULL, *ports = NULL;
    for (PQconninfoOption *o = ns->opts; o->keyword; o++) {
        if (!strcmp(o->keyword, "host"))
            hosts = o->val;
        else if (!strcmp(o->keyword, "hostaddr"))
            addrs = o->val;
        else if (!strcmp(o->keyword, "port"))
            ports = o->val;
    }
    int n = count_items(hosts) > count_items(addrs) ? count_items(hosts)
                                                    : count_items(addrs);
    for (int i = 0; i < n && ns->n < BENCH_MAX_NODES; i++) {
        bench_node *nd = &ns->node[ns->n++];
        list_item(hosts, i, nd->host, sizeof(nd->host));
        list_item(addrs, i, nd->addr, sizeof(nd->addr));
        list_item(ports, count_items(ports) > 1 ? i : 0, nd->port,
                  sizeof(nd->port));
    }
    return 0;
}

void bench_nodes_free(bench_nodes *ns) {
    PQconninfoFree(ns->opts);
    ns->opts = NULL;
}

/* A connection to node nd alone, with the string's other settings. */
static PGconn *node_connect(const bench_nodes *ns, const bench_node *nd) {
    const char *k[64], *v[64];
    int n = 0;
    for (PQconninfoOption *o = ns->opts; o->keyword && n < 58; o++) {
        if (!o->val || !strcmp(o->keyword, "host") ||
            !strcmp(o->keyword, "hostaddr") || !strcmp(o->keyword, "port") ||
            !strcmp(o->keyword, "target_session_attrs") ||
            !strcmp(o->keyword, "load_balance_hosts") ||
            !strcmp(o->keyword, "application_name"))
            continue;
        k[n] = o->keyword;
        v[n++] = o->val;
    }
    const char *extra[][2] = {{"host", nd->host},
                              {"hostaddr", nd->addr},
                              {"port", nd->port},
                              {"application_name", "tether-bench-monitor"},
                              {"connect_timeout", "5"}};
    for (size_t i = 0; i < sizeof(extra) / sizeof(extra[0]); i++)
        if (extra[i][1][0]) {
            k[n] = extra[i][0];
            v[n++] = extra[i][1];
        }
    k[n] = v[n] = NULL;
    return PQconnectdbParams(k, v, 0);
}

void bench_nodes_snapshot(bench_nodes *ns, const char *app, int phase) {
    char sql[512];
    snprintf(sql, sizeof(sql),
             "SELECT inet_server_port(), pg_is_in_recovery()::int, "
             "(SELECT xact_commit FROM pg_stat_database WHERE datname = "
             "current_database()), (SELECT count(*) FROM pg_stat_activity "
             "WHERE application_name = '%s')",
             app);
    for (int i = 0; i < ns->n; i++) {
        bench_node *nd = &ns->node[i];
        PGconn *c = node_connect(ns, nd);
        PGresult *r = PQstatus(c) == CONNECTION_OK ? PQexec(c, sql) : NULL;
        nd->up = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1;
        if (nd->up) {
            nd->standby = atoi(PQgetvalue(r, 0, 1));
            long long x = atoll(PQgetvalue(r, 0, 2));
            if (phase == 0)
                nd->xact0 = x;
            else if (phase == 1)
                nd->backends = atoll(PQgetvalue(r, 0, 3));
            else
                nd->xacts = x - nd->xact0;
        }
        PQclear(r);
        PQfinish(c);
    }
}
