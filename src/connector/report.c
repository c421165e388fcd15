/* report.c - what a failed connect says: every endpoint the run tried or
 * skipped, each with why it was passed over (refused, timed out, of the
 * wrong role, login rejected, too many connections...), in the order they
 * were first met, within TETHER_MSG_MAX ("; ... and 3 more" when they do
 * not all fit). The error's code, class and SQLSTATE stay those of the
 * failure the loop chose; only the message is rewritten. The reasons come
 * from the drivers' messages, which never hold a password. */
#include "connector.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

/* Whether needle occurs in s, ignoring case. */
static int has(const char *s, const char *needle) {
    size_t n = strlen(needle);
    for (; *s; s++) {
        size_t i = 0;
        while (i < n && s[i] &&
               tolower((unsigned char)s[i]) ==
                   tolower((unsigned char)needle[i]))
            i++;
        if (i == n)
            return 1;
    }
    return 0;
}

/* The driver's own words: the text after "connect to X failed: ", up to
 * the end of its first line, at most 72 bytes, into buf. */
static void detail(const char *msg, char *buf, size_t size) {
    static const char head[] = "connect to ";
    const char *f = strstr(msg, " failed: ");
    if (!strncmp(msg, head, sizeof(head) - 1) && f)
        msg = f + 9;
    size_t n = strcspn(msg, "\r\n");
    n = TETHER__MIN(n, 72);
    n = TETHER__MIN(n, size - 1);
    memcpy(buf, msg, n);
    buf[n] = '\0';
    if (n == 72 && size > 76)
        snprintf(buf + n, size - n, "...");
}

/* host:port, [v6]:port, or the host alone when the port is the default. */
static void label(const tether__ep *ep, char *buf, size_t size) {
    const char *h = ep->host       ? ep->host
                    : ep->hostaddr ? ep->hostaddr
                                   : "(default)";
    int v6 = h[0] != '/' && strchr(h, ':') != NULL;
    int n = snprintf(buf, size, v6 ? "[%.46s]" : "%.48s", h);
    if (ep->port > 0 && n > 0 && (size_t)n < size)
        snprintf(buf + n, size - (size_t)n, ":%d", ep->port);
}

/* FNV-1a of a label. */
static uint32_t hash_of(const char *s) {
    uint32_t h = 2166136261u;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

/* set notes why ep was passed over; tried says it was connected to, weak
 * that this reason does not replace one a try found (a skip, an attempt
 * the login deadline cut short). An endpoint met after the first
 * TETHER__TALLY_SHOWN is only counted. */
static void set(tether__tally *t, const tether__ep *ep, int tried, int weak,
                const char *why) {
    char l[TETHER__TALLY_LABEL];
    label(ep, l, sizeof(l));
    uint32_t h = hash_of(l);
    int known = t->n, i = 0;
    while (i < known && !(t->hash[i] == h && (i >= TETHER__TALLY_SHOWN ||
                                              !strcmp(t->label[i], l))))
        i++;
    if (i == known) { /* first met; beyond TETHER__TALLY_HOSTS, ignored */
        if (t->n >= TETHER__TALLY_HOSTS)
            return;
        t->hash[t->n++] = h;
        if (i >= TETHER__TALLY_SHOWN)
            return;
        snprintf(t->label[i], sizeof(t->label[i]), "%s", l);
        t->tried[i] = 0;
    } else if (i >= TETHER__TALLY_SHOWN || (weak && t->tried[i])) {
        return;
    }
    t->tried[i] |= (unsigned char)tried;
    snprintf(t->why[i], sizeof(t->why[i]), "%s", why);
}

void tether__tally_fail(tether__tally *t, const tether__ep *ep,
                        const tether_error *e, int64_t budget_ms, int cut) {
    char d[80], why[TETHER__TALLY_WHY];
    detail(e->message, d, sizeof(d));
    switch (e->code) {
    case TETHER_ETIMEDOUT:
        if (has(e->message, "resolving"))
            snprintf(why, sizeof(why), "timed out resolving its name");
        else if (cut == TETHER__CUT_CALLER)
            snprintf(why, sizeof(why),
                     "not answered within the %lld ms left before the "
                     "caller's deadline",
                     (long long)budget_ms);
        else if (budget_ms >= 0)
            snprintf(why, sizeof(why), "timed out after %lld ms",
                     (long long)budget_ms);
        else
            snprintf(why, sizeof(why), "timed out");
        break;
    case TETHER_ECONNECT:
        if (has(d, "refused"))
            snprintf(why, sizeof(why), "refused");
        else
            snprintf(why, sizeof(why), "failed: %s", d);
        break;
    case TETHER_EAUTH:
        snprintf(why, sizeof(why), "rejected the login: %s", d);
        break;
    case TETHER_ETHROTTLED:
        if (!strcmp(e->sqlstate, "53300") || has(d, "too many") ||
            has(d, "connection slots"))
            snprintf(why, sizeof(why), "has too many connections");
        else
            snprintf(why, sizeof(why), "is not accepting connections: %s", d);
        break;
    case TETHER_ERESOLVE:
        snprintf(why, sizeof(why), "did not resolve: %s", d);
        break;
    default:
        snprintf(why, sizeof(why), "failed: %s", d[0] ? d : "(no message)");
        break;
    }
    set(t, ep, 1, cut, why);
}

void tether__tally_role(tether__tally *t, const tether__ep *ep,
                        tether_role role, tether_target target) {
    char why[TETHER__TALLY_WHY];
    const char *tn = tether_target_name(target);
    if (role == TETHER_ROLE_STANDBY)
        snprintf(why, sizeof(why), "is a standby (read-only), not %s", tn);
    else if (role == TETHER_ROLE_PRIMARY)
        snprintf(why, sizeof(why), "is a primary, not %s", tn);
    else
        snprintf(why, sizeof(why), "did not tell its role, wanted %s", tn);
    set(t, ep, 1, 0, why);
}

void tether__tally_skip(tether__tally *t, const tether__ep *ep, int state) {
    set(t, ep, 0, 1,
        state == HS_DOWN      ? "skipped: down when last tried"
        : state == HS_STANDBY ? "skipped: a standby when last tried"
                              : "skipped: a primary when last tried");
}

void tether__tally_message(const tether__tally *t, tether_target target,
                           int attempts, int64_t elapsed_ms,
                           tether_error *err) {
    if (!err || t->n == 0)
        return;
    char *m = err->message;
    const size_t cap = sizeof(err->message);
    int roles = target != TETHER_TARGET_ANY &&
                target != TETHER_TARGET_PREFER_STANDBY &&
                target != TETHER_TARGET_PREFER_PRIMARY;
    const char *s = attempts == 1 ? "" : "s";
    int n = roles ? snprintf(m, cap,
                             "no %s server after %d attempt%s in %lld "
                             "ms: ",
                             tether_target_name(target), attempts, s,
                             (long long)elapsed_ms)
                  : snprintf(m, cap,
                             "could not connect after %d attempt%s in %lld "
                             "ms: ",
                             attempts, s, (long long)elapsed_ms);
    size_t len = n > 0 ? TETHER__MIN((size_t)n, cap - 1) : 0;
    int shown = TETHER__MIN(t->n, TETHER__TALLY_SHOWN), k = 0;
    for (; k < shown; k++) {
        const char *sep = k ? "; " : "";
        size_t need = strlen(sep) + strlen(t->label[k]) + 1 + strlen(t->why[k]);
        /* Room kept for the tail that counts the hosts left out. */
        int rest = t->n - k - 1;
        int keep = rest ? snprintf(NULL, 0, "; ... and %d more", rest) : 0;
        if (len + need + (size_t)keep + 1 > cap)
            break;
        snprintf(m + len, cap - len, "%s%s %s", sep, t->label[k], t->why[k]);
        len += need;
    }
    if (k < t->n && len < cap)
        snprintf(m + len, cap - len, "%s... and %d more", k ? "; " : "",
                 t->n - k);
}
