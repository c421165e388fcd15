/* scan.c - what a statement the program sends may do to its session.
 * - A custom setting (docs/preload.md, "Custom settings"): SET (SESSION|
 *   LOCAL) a.b, or set_config(...). Such a setting leaves a placeholder in
 *   the backend that no reset removes (after DISCARD ALL it reads '' where
 *   a fresh backend gives NULL), so the connection is closed at PQfinish,
 *   not reused. A setting made inside a server-side function is not seen.
 * - Nothing at all (docs/preload.md, "A give-back without a reset"): a
 *   SELECT that names no function and writes nowhere, or a transaction
 *   command. A connection that ran only such statements is given back
 *   without the reset query. */
#include "preload.h"

#include <ctype.h>
#include <string.h>
#include <strings.h>

static int ident_char(char ch) {
    return isalnum((unsigned char)ch) || ch == '_' || ch == '$';
}

/* word: s starts the word w (case-insensitive) and no identifier goes on. */
static int word(const char *s, const char *w) {
    size_t n = strlen(w);
    return !strncasecmp(s, w, n) && !ident_char(s[n]);
}

static const char *skip_space(const char *s) {
    while (isspace((unsigned char)*s))
        s++;
    return s;
}

/* skip_ident: past one identifier (plain or "quoted"), or s when none. */
static const char *skip_ident(const char *s) {
    if (*s == '"') {
        for (s++; *s; s++)
            if (*s == '"' && *++s != '"')
                return s;
        return s;
    }
    while (ident_char(*s))
        s++;
    return s;
}

/* dotted_set: at "set", followed by [session|local] ident . */
static int dotted_set(const char *s) {
    s = skip_space(s + 3);
    if (word(s, "session") || word(s, "local"))
        s = skip_space(s + (tolower((unsigned char)*s) == 's' ? 7 : 5));
    const char *e = skip_ident(s);
    return e != s && *skip_space(e) == '.';
}

int tether__preload_sql_sets_custom(const char *sql) {
    if (!sql)
        return 0;
    for (const char *p = sql; *p; p++) {
        if (p != sql && ident_char(p[-1]))
            continue;
        if ((*p == 's' || *p == 'S') &&
            (word(p, "set_config") || (word(p, "set") && dotted_set(p))))
            return 1;
    }
    return 0;
}

/* rest_clean: from s on, one statement with nothing that could reach a
 * function or write somewhere: no '(', no INTO, no second statement. */
static int rest_clean(const char *s) {
    for (const char *p = s; *p; p++) {
        if (*p == '(')
            return 0;
        if (*p == ';' && *skip_space(p + 1))
            return 0;
        if ((*p == 'i' || *p == 'I') && !ident_char(p[-1]) && word(p, "into"))
            return 0;
    }
    return 1;
}

int tether__preload_sql_clean(const char *sql) {
    static const char *const verbs[] = {"select", "begin",     "start",
                                        "commit", "end",       "rollback",
                                        "abort",  "savepoint", "release"};
    if (!sql)
        return 0;
    const char *s = skip_space(sql);
    for (size_t i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++)
        if (word(s, verbs[i]))
            return rest_clean(s + strlen(verbs[i]));
    return 0;
}
