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

/* ---- the admin socket's client (admin_client.c, docs/operations.md) ---- */

/* cli_admin_connect connects to the admin socket at path; returns the
 * descriptor, or -1 with why (cap bytes) filled. */
int cli_admin_connect(const char *path, char *why, size_t cap);

/* cli_admin_request sends req (one line, its newline included) on fd and
 * returns the one-line answer without its newline (malloc'd), or NULL with
 * why filled when none came whole within timeout_ms. */
char *cli_admin_request(int fd, const char *req, int timeout_ms, char *why,
                        size_t cap);

/* A JSON document read by cli_json_parse: an array of nodes, the root
 * first; children and siblings are indices (-1: none). Strings are cut at
 * 160 bytes (the pools document's longest is a pool name). */
enum {
    CLI_JSON_NULL,
    CLI_JSON_BOOL,
    CLI_JSON_NUMBER,
    CLI_JSON_STRING,
    CLI_JSON_ARRAY,
    CLI_JSON_OBJECT
};
typedef struct cli_json {
    int type, child, next;
    char key[64];
    char str[160];
    double num;
} cli_json;

/* cli_json_parse reads text (malloc'd nodes, free() them), or NULL when it
 * is not one JSON value. */
cli_json *cli_json_parse(const char *text);

/* cli_json_get returns obj's member key, or NULL. */
const cli_json *cli_json_get(const cli_json *doc, const cli_json *obj,
                             const char *key);

/* cli_json_at returns element i of array arr, or NULL. */
const cli_json *cli_json_at(const cli_json *doc, const cli_json *arr, int i);

/* cli_json_num returns member key of obj as a number (true is 1), else
 * dflt; cli_json_text returns it as a string, else NULL. */
double cli_json_num(const cli_json *doc, const cli_json *obj, const char *key,
                    double dflt);
const char *cli_json_text(const cli_json *doc, const cli_json *obj,
                          const char *key);

/* The command's own subcommands (plan.c, probe.c, top.c, ctl.c); the lab's
 * are in lab.h. */
int cli_plan(int argc, char **argv);
int cli_probe(int argc, char **argv);
int cli_top(int argc, char **argv);
int cli_ctl(int argc, char **argv);

#endif
