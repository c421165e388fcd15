/* main.c - the tether command: subcommand dispatch and shared helpers. */
#include "cli.h"
#include "lab.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

static const cli_command commands[] = {
    {"plan", "print the connection schedule a strategy follows", cli_plan},
    {"sim", "simulate a reconnect storm (tether sim storm)", tether__lab_sim},
    {"bench", "benchmark the pool (tether bench cycle)", tether__lab_bench},
    {"probe", "connect once and show every attempt", cli_probe},
    {"top", "a live view of a process's pools (its admin socket)", cli_top},
    {"ctl", "pause, resume, resize, evict or reconnect a live pool", cli_ctl},
    {"demo", "a live workload while the database fails (scratch cluster)",
     tether__lab_demo},
};
#define NCOMMANDS (sizeof(commands) / sizeof(commands[0]))

static void usage(FILE *f) {
    fprintf(f,
            "usage: tether COMMAND [OPTIONS]\n\n"
            "tether %s: connection pool, failover connector and "
            "transient-fault handling.\n\ncommands:\n",
            tether_version());
    for (size_t i = 0; i < NCOMMANDS; i++)
        fprintf(f, "  %-8s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "  %-8s %s\n", "version",
            "print the version (also -V, --version)");
    fprintf(f, "\nRun 'tether COMMAND --help' for a command's options.\n");
}

/* `tether version`, `tether -V`, `tether --version`. */
static int version(int argc, char **argv) {
    if (cli_want_help(argc, argv)) {
        printf("usage: tether version\n\nPrints the version of tether "
               "(tether_version()); also tether -V, tether --version.\n");
        return CLI_OK;
    }
    if (argc > 1)
        return cli_usage_error("version", "unexpected argument '%s'", argv[1]);
    printf("tether %s\n", tether_version());
    return CLI_OK;
}

int cli_usage_error(const char *cmd, const char *fmt, ...) {
    va_list ap;
    fprintf(stderr, "tether %s: ", cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nRun 'tether %s --help' for usage.\n", cmd);
    return CLI_USAGE;
}

int cli_want_help(int argc, char **argv) {
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help"))
            return 1;
    return 0;
}

/* The long option of opts whose val is val, or NULL. */
static const struct option *opt_by_val(const struct option *opts, int val) {
    for (; opts->name; opts++)
        if (!opts->flag && opts->val == val)
            return opts;
    return NULL;
}

/* How many long options of opts begin with the n characters of name. */
static int opts_matching(const struct option *opts, const char *name,
                         size_t n) {
    int k = 0;
    for (; opts->name; opts++)
        k += !strncmp(opts->name, name, n);
    return k;
}

/* Prints what getopt_long's result c (':' or '?') for argv element arg
 * means; returns CLI_USAGE. */
static int opt_error(const char *cmd, const struct option *opts, int c,
                     const char *arg) {
    const struct option *o = opt_by_val(opts, optopt);
    if (c == ':')
        return cli_usage_error(cmd, "option --%s needs a value",
                               o ? o->name : arg + 2);
    if (strncmp(arg, "--", 2) != 0)
        return cli_usage_error(cmd, "unknown option '-%c'",
                               optopt ? optopt : '?');
    /* Never the text after '=': "--conninf=... password=p" */
    if (o && optopt && strchr(arg, '='))
        return cli_usage_error(cmd, "option --%s takes no value", o->name);
    size_t n = strcspn(arg + 2, "=");
    if (opts_matching(opts, arg + 2, n) > 1)
        return cli_usage_error(cmd, "ambiguous option '%.*s'", (int)n + 2, arg);
    return cli_usage_error(cmd, "unknown option '%.*s'", (int)n + 2, arg);
}

int cli_parse_opts(const char *cmd, int argc, char **argv,
                   const struct option *opts, cli_opt_fn fn, void *ctx) {
    optind = 0; /* start afresh (glibc, musl) */
    opterr = 0; /* errors are reported by opt_error */
    for (;;) {
        int at = optind ? optind : 1; /* the element being read */
        int c = getopt_long(argc, argv, "-:", opts, NULL);
        if (c == -1)
            break;
        if (c == ':' || c == '?')
            return opt_error(cmd, opts, c, argv[at]);
        /* "--pool --seconds 1": --pool's value is missing, not "--seconds" */
        if (c != 1 && optarg && optarg == argv[optind - 1] &&
            !strncmp(optarg, "--", 2))
            return cli_usage_error(cmd, "option --%s needs a value, not '%s'",
                                   opt_by_val(opts, c)->name, optarg);
        int rc = fn(ctx, c, optarg);
        if (rc)
            return rc;
    }
    for (int i = optind; i < argc; i++) { /* the arguments after "--" */
        int rc = fn(ctx, 1, argv[i]);
        if (rc)
            return rc;
    }
    return 0;
}

int cli_parse_int(const char *cmd, const char *opt, const char *text,
                  long long lo, long long hi, long long *out) {
    char *end;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    /* strtoll would also take leading blanks and a '+' */
    if (!(isdigit((unsigned char)*text) || *text == '-') || *end ||
        errno == ERANGE || v < lo || v > hi) {
        cli_usage_error(cmd,
                        "bad value '%s' for %s: want an integer in "
                        "[%lld, %lld]",
                        text, opt, lo, hi);
        return -1;
    }
    *out = v;
    return 0;
}

int cli_parse_count(const char *cmd, const char *opt, const char *text, int lo,
                    int hi, int *out) {
    long long v;
    if (cli_parse_int(cmd, opt, text, lo, hi, &v))
        return CLI_USAGE;
    *out = (int)v;
    return 0;
}

int cli_parse_duration(const char *cmd, const char *opt, const char *text,
                       int64_t *ms) {
    char *end;
    int64_t v = -1;
    errno = 0;
    long long secs = strtoll(text, &end, 10);
    if (isdigit((unsigned char)*text) && !*end && errno == 0 &&
        secs <= CLI_MAX_DURATION_MS / 1000)
        v = secs * 1000; /* a bare number is seconds */
    else if (tether_duration_parse(text, &v) != 0)
        v = -1;
    if (v >= 0 && v <= CLI_MAX_DURATION_MS) {
        *ms = v;
        return 0;
    }
    cli_usage_error(cmd,
                    "bad duration '%s' for %s: want e.g. 500ms, 15s, 2m "
                    "(at most 30 days)",
                    text, opt);
    return -1;
}

int cli_parse_seconds(const char *cmd, const char *text, int64_t *ms) {
    int64_t v;
    if (cli_parse_duration(cmd, "--seconds", text, &v))
        return -1;
    if (v <= 0) {
        cli_usage_error(cmd, "bad value '%s' for --seconds: must be > 0", text);
        return -1;
    }
    *ms = v;
    return 0;
}

/* The length of the valid UTF-8 sequence at s (1-4), or 0 when the bytes
 * there are not one (overlong forms, surrogates and code points above
 * U+10FFFF included). */
static int utf8_len(const unsigned char *s) {
    unsigned c = s[0];
    int n = c < 0x80                 ? 1
            : c >= 0xC2 && c <= 0xDF ? 2
            : (c & 0xF0) == 0xE0     ? 3
            : c >= 0xF0 && c <= 0xF4 ? 4
                                     : 0;
    for (int i = 1; i < n; i++)
        if ((s[i] & 0xC0) != 0x80)
            return 0;
    if ((c == 0xE0 && s[1] < 0xA0) || (c == 0xED && s[1] > 0x9F) ||
        (c == 0xF0 && s[1] < 0x90) || (c == 0xF4 && s[1] > 0x8F))
        return 0;
    return n;
}

void cli_json_str(const char *s) {
    putchar('"');
    const unsigned char *p = (const unsigned char *)(s ? s : "");
    while (*p) {
        int n = utf8_len(p);
        if (n == 0) { /* not UTF-8: JSON text must be */
            fputs("\\ufffd", stdout);
            p++;
        } else if (*p == '"' || *p == '\\') {
            printf("\\%c", *p++);
        } else if (*p < 0x20 || *p == 0x7F) {
            printf("\\u%04x", *p++);
        } else {
            fwrite(p, 1, (size_t)n, stdout);
            p += n;
        }
    }
    putchar('"');
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return CLI_USAGE;
    }
    if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") ||
        !strcmp(argv[1], "help")) {
        usage(stdout);
        return CLI_OK;
    }
    if (!strcmp(argv[1], "version") || !strcmp(argv[1], "-V") ||
        !strcmp(argv[1], "--version"))
        return version(argc - 1, argv + 1);
    for (size_t i = 0; i < NCOMMANDS; i++)
        if (!strcmp(argv[1], commands[i].name))
            return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "tether: unknown command '%s'\n\n", argv[1]);
    usage(stderr);
    return CLI_USAGE;
}
