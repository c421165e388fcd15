/* scan.c - does a statement the program sends make a custom setting
 * (docs/preload.md, "Custom settings")? SET (SESSION|LOCAL) a.b, or
 * set_config(...). Such a setting leaves a placeholder in the backend that
 * no reset removes (after DISCARD ALL it reads '' where a fresh backend
 * gives NULL), so the connection is closed at PQfinish, not reused. A
 * setting made inside a server-side function is not seen. */
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
