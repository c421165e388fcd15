/* check_conninfo.c - docs/conninfo.md against the keyword tables the
 * layers register (src/conninfo/conninfo.h, "keyword tables"): every
 * keyword of tether's tables has a row in one of the document's keyword
 * tables (those whose header starts "| keyword |"), every row there is a
 * keyword of tether's tables, and every `tether_...=` the text shows is
 * one. Usage: check_conninfo docs/conninfo.md. Prints each mismatch and
 * exits 1 when there is one. */
#include "conninfo.h"
#include "tether.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ROWS 256
#define NAME_MAX_LEN 64

static char rows[MAX_ROWS][NAME_MAX_LEN];
static int nrows;

/* tether_kind says whether kw is in one of tether's own tables. */
static int tether_kind(const char *kw) {
    tether__kw_kind k = tether__conninfo_kind(kw);
    return k == TETHER__KW_ENDPOINT || k == TETHER__KW_CONNECTOR ||
           k == TETHER__KW_POOL;
}

/* row_name copies the first cell of a row "| `name` | ..." into out. */
static int row_name(const char *line, char out[NAME_MAX_LEN]) {
    if (strncmp(line, "| `", 3) != 0)
        return 0;
    const char *a = line + 3, *b = strchr(a, '`');
    if (!b || b - a >= NAME_MAX_LEN)
        return 0;
    memcpy(out, a, (size_t)(b - a));
    out[b - a] = '\0';
    return 1;
}

/* check_assignments reports each "tether_xxx=" in line that is not one of
 * tether's keywords. */
static int check_assignments(const char *line, int lineno) {
    int bad = 0;
    for (const char *p = strstr(line, "tether_"); p;
         p = strstr(p + 1, "tether_")) {
        if (p > line && (p[-1] == '_' || (p[-1] >= 'a' && p[-1] <= 'z')))
            continue;
        size_t n = strspn(p, "abcdefghijklmnopqrstuvwxyz_0123456789");
        char kw[NAME_MAX_LEN];
        if (p[n] != '=' || n >= sizeof(kw))
            continue;
        memcpy(kw, p, n);
        kw[n] = '\0';
        if (!tether_kind(kw)) {
            printf("docs/conninfo.md:%d: %s= is no keyword of tether's "
                   "tables\n",
                   lineno, kw);
            bad = 1;
        }
    }
    return bad;
}

/* read_doc collects the keyword rows of path and checks each. */
static int read_doc(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) {
        perror(path);
        return 1;
    }
    char line[4096], name[NAME_MAX_LEN];
    int bad = 0, lineno = 0, in_table = 0;
    while (fgets(line, sizeof(line), f)) {
        lineno++;
        if (line[0] != '|')
            in_table = 0;
        else if (strncmp(line, "| keyword |", 11) == 0)
            in_table = 1;
        bad |= check_assignments(line, lineno);
        if (!in_table || !row_name(line, name))
            continue;
        if (!tether_kind(name)) {
            printf("docs/conninfo.md:%d: `%s` is documented as tether's but "
                   "no layer's keyword table has it\n",
                   lineno, name);
            bad = 1;
        }
        if (nrows < MAX_ROWS)
            strcpy(rows[nrows++], name);
    }
    fclose(f);
    return bad;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: check_conninfo docs/conninfo.md\n");
        return 2;
    }
    int bad = read_doc(argv[1]), n = 0;
    tether__kwinfo kw;
    for (size_t i = 0; tether__keyword_at(i, &kw) == 0; i++) {
        if (kw.kind == TETHER__KW_LIBPQ)
            continue;
        n++;
        int found = 0;
        for (int r = 0; r < nrows && !found; r++)
            found = strcmp(rows[r], kw.name) == 0;
        if (!found) {
            printf("%s (%s): in the %s table, not documented in "
                   "docs/conninfo.md's keyword tables\n",
                   kw.name, kw.desc, kw.layer);
            bad = 1;
        }
    }
    if (n < 30) {
        printf("only %d keywords registered: a table is missing\n", n);
        bad = 1;
    }
    printf("%d keywords in the tables, %d rows in docs/conninfo.md: %s\n", n,
           nrows, bad ? "MISMATCH" : "ok");
    return bad;
}
