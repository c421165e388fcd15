/* main.c - the tether command: subcommand dispatch and shared helpers. */
#include "cli.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

static const cli_command commands[] = {
    {"plan", "print the connection schedule a strategy follows", cli_plan},
    {"sim", "simulate a reconnect storm (tether sim storm)", cli_sim},
    {"bench", "benchmark the pool (tether bench cycle)", cli_bench},
    {"probe", "connect once and show every attempt", cli_probe},
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
    fprintf(f, "\nRun 'tether COMMAND --help' for a command's options.\n");
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

int cli_opt_is(const char *arg, const char *name) {
    size_t n = strlen(name);
    return !strncmp(arg, name, n) && (arg[n] == '\0' || arg[n] == '=');
}

const char *cli_value(const char *cmd, int argc, char **argv, int *i) {
    const char *eq = strchr(argv[*i], '=');
    if (eq)
        return eq + 1;
    if (*i + 1 >= argc) {
        cli_usage_error(cmd, "option %s needs a value", argv[*i]);
        return NULL;
    }
    return argv[++*i];
}

int cli_parse_int(const char *cmd, const char *opt, const char *text,
                  long long lo, long long hi, long long *out) {
    char *end;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (!*text || *end || errno == ERANGE || v < lo || v > hi) {
        cli_usage_error(cmd,
                        "bad value '%s' for %s: want an integer in "
                        "[%lld, %lld]",
                        text, opt, lo, hi);
        return -1;
    }
    *out = v;
    return 0;
}

int cli_parse_duration(const char *cmd, const char *opt, const char *text,
                       int64_t *ms) {
    char *end;
    errno = 0;
    long long secs = strtoll(text, &end, 10);
    if (*text && !*end && errno == 0 && secs >= 0 && secs <= INT64_MAX / 1000) {
        *ms = secs * 1000; /* a bare number is seconds */
        return 0;
    }
    if (tether_duration_parse(text, ms) == 0)
        return 0;
    cli_usage_error(cmd, "bad duration '%s' for %s: want e.g. 500ms, 15s, 2m",
                    text, opt);
    return -1;
}

void cli_json_str(const char *s) {
    putchar('"');
    for (; s && *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            printf("\\%c", ch);
        else if (ch < 0x20)
            printf("\\u%04x", ch);
        else
            putchar(ch);
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
    if (!strcmp(argv[1], "--version")) {
        printf("tether %s\n", tether_version());
        return CLI_OK;
    }
    for (size_t i = 0; i < NCOMMANDS; i++)
        if (!strcmp(argv[1], commands[i].name))
            return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "tether: unknown command '%s'\n\n", argv[1]);
    usage(stderr);
    return CLI_USAGE;
}
