/* cli.h - the tether command's shared helpers (argument parsing, usage
 * errors, JSON strings: main.c) and its subcommands. The commands of
 * src/cli and those of the lab (src/lab, lab.h) use them; both see the
 * public headers only (include/). */
#ifndef TETHER_CLI_H
#define TETHER_CLI_H

#include "tether.h"

#include <getopt.h>
#include <stdint.h>
#include <stdio.h>

/* A subcommand: name, one-line summary, entry point. */
typedef struct cli_command {
    const char *name;
    const char *summary;
    int (*run)(int argc, char **argv);
} cli_command;

/* Exit codes of the tether command. */
enum { CLI_OK = 0, CLI_FAIL = 1, CLI_USAGE = 2 };

/* cli_usage_error prints "tether CMD: message" and a --help hint to stderr
 * and returns CLI_USAGE. */
int cli_usage_error(const char *cmd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* cli_want_help returns 1 when argv holds -h or --help. */
int cli_want_help(int argc, char **argv);

/* A subcommand's option handler: opt is the option's val in its struct
 * option table, or 1 for an argument that is not an option; val is the
 * option's value (NULL for a flag) or the argument. Returns 0, or CLI_USAGE
 * with the error printed (cli_usage_error). */
typedef int (*cli_opt_fn)(void *ctx, int opt, const char *val);

/* cli_parse_opts reads argv (argv[0] the subcommand) with getopt_long and
 * the long options opts (there are no short ones: -h and --help are the
 * caller's, through cli_want_help), calling fn for each option and
 * argument in order. An unknown or ambiguous option, a missing value (also
 * "--a --b", where --a takes a value) and a value given to a flag are
 * printed as usage errors naming the option. Returns 0, or CLI_USAGE. */
int cli_parse_opts(const char *cmd, int argc, char **argv,
                   const struct option *opts, cli_opt_fn fn, void *ctx);

/* cli_parse_int parses a whole decimal integer within [lo, hi]; else it
 * prints "bad value 'TEXT' for OPT: ..." and returns -1. */
int cli_parse_int(const char *cmd, const char *opt, const char *text,
                  long long lo, long long hi, long long *out);

/* The longest duration an option takes: 30 days (so that sums of
 * durations cannot overflow, and simulations end). */
#define CLI_MAX_DURATION_MS (30LL * 24 * 3600 * 1000)

/* cli_parse_count is cli_parse_int into an int; returns 0 or CLI_USAGE,
 * as a cli_opt_fn does. */
int cli_parse_count(const char *cmd, const char *opt, const char *text, int lo,
                    int hi, int *out);

/* cli_parse_duration parses a duration with unit (ms, s, m, h), or a bare
 * number of seconds, into milliseconds, at most CLI_MAX_DURATION_MS. */
int cli_parse_duration(const char *cmd, const char *opt, const char *text,
                       int64_t *ms);

/* cli_parse_seconds parses --seconds: a duration (as cli_parse_duration)
 * greater than zero. */
int cli_parse_seconds(const char *cmd, const char *text, int64_t *ms);

/* cli_json_str prints s (NULL: "") as a JSON string: quotes, backslashes,
 * control bytes and DEL escaped, bytes that are not UTF-8 (from arguments,
 * server messages) replaced by \ufffd, so that the output is valid JSON. */
void cli_json_str(const char *s);

/* The command's own subcommands (plan.c, probe.c); the lab's are in
 * lab.h. */
int cli_plan(int argc, char **argv);
int cli_probe(int argc, char **argv);

#endif
