/* prep.c - the statements a program prepared on a pooled connection, kept
 * across its give-backs (docs/preload.md, "Prepared statements survive
 * the give-back"). The default reset leaves prepared statements in place;
 * a later PQprepare of the same name with the same text and types is
 * answered without a round trip, one with the same name and another text
 * deallocates it first. What the preload cannot follow (SQL that
 * prepares, deallocates or discards; PQsendPrepare) makes the list
 * unknown: it is emptied, and the give-back deallocates every statement.
 * The list lives in the connection's slot (table.c), under its lock. */
#include "preload.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* One statement prepared on the connection. */
struct tether__preload_prep {
    char *name, *query;
    int n;
    Oid *types; /* n entries, or NULL when n is 0 or none were given */
    int used;   /* prepared by the program in this lease */
    struct tether__preload_prep *next;
};

/* A connection keeps at most this many; past it the list is unknown. */
#define PREP_MAX 256

static int same_types(const tether__preload_prep *p, int n, const Oid *types) {
    if (p->n != n)
        return 0;
    for (int i = 0; i < n; i++)
        if ((p->types ? p->types[i] : 0) != (types ? types[i] : 0))
            return 0;
    return 1;
}

int tether__preload_prep_find(const tether__preload_prep *list,
                              const char *name, const char *query, int n,
                              const Oid *types) {
    for (const tether__preload_prep *p = list; p; p = p->next)
        if (!strcmp(p->name, name))
            return !strcmp(p->query, query) && same_types(p, n, types)
                       ? TETHER__PRELOAD_PREP_SAME
                       : TETHER__PRELOAD_PREP_OTHER;
    return TETHER__PRELOAD_PREP_NONE;
}

void tether__preload_prep_drop(tether__preload_prep **list, const char *name) {
    for (tether__preload_prep **pp = list; *pp; pp = &(*pp)->next)
        if (!strcmp((*pp)->name, name)) {
            tether__preload_prep *p = *pp;
            *pp = p->next;
            free(p->name);
            free(p->query);
            free(p->types);
            free(p);
            return;
        }
}

void tether__preload_prep_free(tether__preload_prep **list) {
    while (*list)
        tether__preload_prep_drop(list, (*list)->name);
}

int tether__preload_prep_add(tether__preload_prep **list, const char *name,
                             const char *query, int n, const Oid *types) {
    int count = 0;
    for (tether__preload_prep *p = *list; p; p = p->next)
        count++;
    if (count >= PREP_MAX)
        return -1;
    tether__preload_prep *p = calloc(1, sizeof(*p));
    if (p) {
        p->name = strdup(name);
        p->query = strdup(query);
        p->n = n;
        if (n > 0 && types && (p->types = malloc(sizeof(Oid) * n)) != NULL)
            memcpy(p->types, types, sizeof(Oid) * n);
    }
    if (!p || !p->name || !p->query || (n > 0 && types && !p->types)) {
        if (p) {
            free(p->name);
            free(p->query);
            free(p->types);
            free(p);
        }
        return -1;
    }
    p->used = 1;
    p->next = *list;
    *list = p;
    return 0;
}

void tether__preload_prep_mark(tether__preload_prep *list, const char *name,
                               int used) {
    for (tether__preload_prep *p = list; p; p = p->next)
        if (!name || !strcmp(p->name, name))
            p->used = used;
}

char *tether__preload_prep_take_stale(tether__preload_prep **list, PGconn *pg) {
    tether__preload_sb b = {NULL, 0, 0, 1};
    for (tether__preload_prep **pp = list; *pp;) {
        if ((*pp)->used) {
            pp = &(*pp)->next;
            continue;
        }
        char *id = PQescapeIdentifier(pg, (*pp)->name, strlen((*pp)->name));
        if (!id) { /* out of memory: the statement stays */
            pp = &(*pp)->next;
            continue;
        }
        tether__preload_sb_str(&b, "DEALLOCATE ");
        tether__preload_sb_str(&b, id);
        tether__preload_sb_str(&b, "; ");
        PQfreemem(id);
        tether__preload_prep_drop(pp, (*pp)->name);
    }
    return b.n ? tether__preload_sb_done(&b) : (free(b.s), NULL);
}

static int ident_char(char ch) {
    return isalnum((unsigned char)ch) || ch == '_' || ch == '$';
}

int tether__preload_sql_touches_prepared(const char *sql) {
    static const char *const words[] = {"prepare", "deallocate", "discard"};
    if (!sql)
        return 0;
    for (const char *p = sql; *p; p++) {
        char ch = (char)tolower((unsigned char)*p);
        if ((ch != 'p' && ch != 'd') || (p != sql && ident_char(p[-1])))
            continue;
        for (size_t i = 0; i < sizeof(words) / sizeof(*words); i++) {
            size_t n = strlen(words[i]);
            if (!strncasecmp(p, words[i], n) && !ident_char(p[n]))
                return 1;
        }
    }
    return 0;
}
