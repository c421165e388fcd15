/* cli.h - shared helpers of the tether command (public header only). */
#ifndef TETHER_CLI_H
#define TETHER_CLI_H

#include "tether.h"
#include "tether_pq.h"
#include "tether_sim.h"

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

/* cli_value returns the value of option argv[*i] ("--key v" or "--key=v"),
 * advancing *i, or NULL (with an error printed) when it is missing. */
const char *cli_value(const char *cmd, int argc, char **argv, int *i);

/* cli_opt_is returns 1 when arg is "--name" or "--name=...". */
int cli_opt_is(const char *arg, const char *name);

/* cli_parse_int parses a whole decimal integer within [lo, hi]. */
int cli_parse_int(const char *cmd, const char *opt, const char *text,
                  long long lo, long long hi, long long *out);

/* cli_parse_duration parses a duration with unit (ms, s, m, h), or a bare
 * number of seconds, into milliseconds. */
int cli_parse_duration(const char *cmd, const char *opt, const char *text,
                       int64_t *ms);

/* cli_json_str prints s (NULL: "") as a JSON string: quotes, backslashes
 * and control bytes escaped. */
void cli_json_str(const char *s);

int cli_plan(int argc, char **argv);
int cli_sim(int argc, char **argv);
int cli_bench(int argc, char **argv);
int cli_bench_query(int argc, char **argv);
int cli_probe(int argc, char **argv);

#endif
