/*
 * allot, the command line of an allot cluster: the declarations its files
 * share. One file per concept:
 *
 *   main.c         the verb table, global options, `allot --help`
 *   args.c         the per-verb option tables: parsing and `--help`
 *   conf.c         server, token and defaults from flags, environment
 *                  (ALLOT_SERVER, ALLOT_TOKEN) and ~/.config/allot/config
 *   client.c       HTTP on libcurl: bearer token, JSON bodies, retries,
 *                  Idempotency-Key, paging, error replies -> exit codes
 *   output.c       table, JSON and YAML output of jansson values
 *   input.c        -f FILE: JSON or YAML (libyaml) into a jansson value
 *   cmd_jobs.c     submit, ls, show, cancel, events
 *   cmd_tenants.c  tenants, quota, apply
 *   cmd_admin.c    nodes, cordon, drain, uncordon, tokens, audit
 *   cmd_top.c      top
 *
 * Errors are printed once, where they are found, as `allot: CODE: MESSAGE`
 * on stderr; functions return an exit code (enum cli_exit) that travels up
 * to main() unchanged. Single-threaded.
 */
#ifndef ALLOT_CLI_H
#define ALLOT_CLI_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Exit codes, documented in docs/cli/allot.md. */
enum cli_exit {
    CLI_OK = 0,
    CLI_USAGE = 1,     /* bad option or argument, unreadable file, no token */
    CLI_NOTFOUND = 2,  /* 404 */
    CLI_DENIED = 3,    /* 401, 403 */
    CLI_CONFLICT = 4,  /* 409 */
    CLI_SERVER = 5,    /* no connection, timeout, 5xx, 429, a reply that is not the API's */
    CLI_INVALID = 6,   /* 400, 413, 422: the server refused the request */
    CLI_AUDIT_BAD = 7, /* `audit verify`: the chain is broken */
    CLI_HELP = -1      /* internal: --help was printed; exit 0 */
};

enum cli_format { CLI_FMT_TABLE, CLI_FMT_JSON, CLI_FMT_YAML, CLI_FMT_CSV, CLI_FMT_HTML };

/* Settings from conf.c; the strings are owned by the struct (conf_free). */
struct cli_conf {
    char *server;    /* base URL, e.g. http://127.0.0.1:7070 */
    char *token;     /* bearer token or NULL */
    char *output;    /* "table", "json", "yaml", "csv" or "html" */
    char *cacert;    /* PEM file of the CA that signed allotd's certificate, or NULL */
    char *config;    /* config file named with --config, or NULL */
    int64_t retries; /* extra attempts after a failure that may be retried */
    int64_t timeout; /* milliseconds per HTTP request */
    bool verbose;
};

/* Everything a verb needs. */
struct cli {
    struct cli_conf conf;
    enum cli_format fmt;
    struct client *http; /* owned; created on first use by cli_client() */
};

/* ---- args.c: per-verb option tables ---- */

struct cli_opt {
    const char *name; /* long name, without the dashes */
    char short_name;  /* 0: none */
    const char *arg;  /* placeholder of the value in --help; NULL: a flag */
    const char *help; /* one line */
};

#define CLI_MAX_OPTS 40

/* The result of parsing one verb's arguments. The strings point into argv
 * (borrowed). */
struct cli_args {
    const struct cli_opt *opts;
    size_t n_opts;
    const char **vals[CLI_MAX_OPTS]; /* per option: every value given (flags: "") */
    size_t n_vals[CLI_MAX_OPTS];
    const char **pos; /* positional arguments */
    size_t n_pos;
    char **rest; /* after `--` (NULL when there was none) */
    int n_rest;
};

/* What `allot VERB --help` prints besides the options. */
struct cli_usage {
    const char *verb;     /* "submit", "tokens create" */
    const char *synopsis; /* after the verb */
    const char *summary;  /* one or more lines */
};

/* Parses argv[0..argc) (argv[0] is the first argument after the verb) by
 * the table opts (never NULL; ends with an entry whose name is NULL).
 * Global options (see conf.c) are accepted anywhere and stored in c->conf.
 * `-h`/`--help` prints the usage and returns CLI_HELP. Returns CLI_OK, or
 * CLI_USAGE after printing what is wrong. Free a with args_free. */
int args_parse(struct cli *c, const struct cli_opt *opts, const struct cli_usage *u, int argc,
               char **argv, struct cli_args *a);

/* args_parse, but the first positional argument ends the options: what
 * follows it (after an optional --) is its arguments, in a->rest (allot
 * submit SCRIPT ARGS, as sbatch). */
int args_parse_operand(struct cli *c, const struct cli_opt *opts, const struct cli_usage *u,
                       int argc, char **argv, struct cli_args *a);

void args_free(struct cli_args *a);
/* Gives a the values `from` holds for every option a has none of (the
 * strings stay from's: they must outlive a). CLI_OK or CLI_USAGE. */
int args_merge(struct cli_args *a, const struct cli_args *from);
/* Expands host list s (or the file of host lists it names, when it holds
 * a '/', as sbatch -w/-x) into the JSON array list, the names not yet in
 * the object seen (which it adds them to), at most ALLOT_HOSTLIST_MAX in
 * all; `where` names s in a message. CLI_OK or CLI_USAGE (printed). */
int args_hosts(json_t *list, json_t *seen, const char *s, const char *where);

/* Forgets the values of option `name` in a (its array stays a's). */
void args_drop(struct cli_args *a, const char *name);

/* A batch script of allot submit/run SCRIPT (script.c): its text and the
 * words of its #ALLOT and #SBATCH directives as allot options. */
struct cli_script {
    char *text;  /* the script as read, sent as the job's "script" */
    char **argv; /* owned: directive words (the strings a's merged values point to) */
    int argc;
};
/* Reads the script at path (at most 64 KiB, "#!" first, no DOS line
 * breaks) and gives a the options of its directives that a does not give
 * itself, nor one of the same group (as sbatch: the command line wins),
 * with u for messages; directives may not give global options (server,
 * token, output) or ask for help. CLI_OK or CLI_USAGE (printed; s then
 * empty). The values a took point into s: read no option of a after
 * script_free(s). */
int script_load(struct cli *c, const char *path, const struct cli_usage *u, struct cli_args *a,
                struct cli_script *s);
/* Frees what script_load made; s is empty after. */
void script_free(struct cli_script *s);

/* Last value of option `name`, or NULL when not given. */
const char *args_get(const struct cli_args *a, const char *name);

/* Whether flag or option `name` was given. */
bool args_has(const struct cli_args *a, const char *name);

/* Every value of a repeatable option; *n receives the count. */
const char *const *args_all(const struct cli_args *a, const char *name, size_t *n);

/* Prints the usage of a verb with its option table. */
void args_help(const struct cli_opt *opts, const struct cli_usage *u, FILE *out);

/* Strict number parsers for option values; print `allot: usage: ...` and
 * return CLI_USAGE on a bad value. `opt` is the option's name (the message
 * says --opt), or for a positional argument words with a space ("job id"). */
int args_int(const char *opt, const char *s, int64_t lo, int64_t hi, int64_t *out);
int args_num(const char *opt, const char *s, double lo, double hi, double *out);
/* A size in MiB: bare numbers are MiB; K, M, G, T (also Ki, Mi, KiB, MB ...)
 * are powers of 1024; rounded up to whole MiB. */
int args_mib(const char *opt, const char *s, int64_t *out);
/* A duration in seconds: bare seconds, or with s, m, h, d; or Slurm's
 * MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS. */
int args_seconds(const char *opt, const char *s, int64_t *out);
/* A point in time (Unix s) as sbatch --begin takes it: now, now+DURATION,
 * YYYY-MM-DD[THH:MM[:SS]] or HH:MM[:SS] (its next coming), in local time or
 * with a trailing Z in UTC. `now` is the current time. */
int args_begin(const char *opt, const char *s, int64_t now, int64_t *out);

/* Prints `allot: usage: MESSAGE` and returns CLI_USAGE. */
int cli_usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

struct allot_label;
/* The labels of --constraint K=V[,K=V] given n times (v), as one list (a
 * label given twice, more than ALLOT_MAX_SELECT, a bad label or Slurm's &
 * and | are usage errors): into out, pointing into *buf (free it, also on
 * error). Returns their count, or CLI_USAGE negated (-CLI_USAGE) after
 * printing what is wrong. */
int args_constraint(const char *const *v, size_t n, char **buf, struct allot_label *out);

/* Prints `allot: CODE: MESSAGE` to stderr. */
void cli_error(const char *code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- conf.c ---- */

/* Defaults, then the config file, then ALLOT_SERVER / ALLOT_TOKEN /
 * ALLOT_OUTPUT; command-line flags are applied afterwards by conf_set.
 * Returns CLI_OK or CLI_USAGE (message printed). */
int conf_load(struct cli_conf *cf, const char *config_path);

/* Sets a global option from the command line. Returns 1 when `name` is a
 * global option (value used), 0 when it is not one, or -CLI_USAGE on a bad
 * value (message printed). needs_value says whether it takes a value. */
int conf_set(struct cli_conf *cf, const char *name, const char *value);
bool conf_is_global(const char *name, char short_name, bool *needs_value, const char **long_name);

/* Writes the global options for --help. */
void conf_help(FILE *out);

void conf_free(struct cli_conf *cf);

/* ---- client.c ---- */

struct client;

/* How a request may be retried. */
enum client_retry {
    CLIENT_RETRY_CONNECT, /* only when nothing reached the server (connect failed) */
    CLIENT_RETRY_ALWAYS   /* also after a lost reply: GET, PUT, a POST with a key */
};

/* The client of c, created on first use; NULL after printing an error
 * (c->conf has no usable server or no token). */
struct client *cli_client(struct cli *c);

void client_free(struct client *cl);

/* One API call: METHOD path (with query), optional JSON body (borrowed),
 * optional Idempotency-Key. On success (2xx) returns CLI_OK and the parsed
 * reply in *reply (new reference; may be NULL when the body was empty) and
 * the status in *status when not NULL. On failure prints
 * `allot: CODE: MESSAGE` and returns the exit code of the error. */
int client_call(struct client *cl, const char *method, const char *path, json_t *body,
                const char *idem_key, enum client_retry retry, json_t **reply, long *status);

/* GET path; on 2xx *out gets the body as it is (allot_free; NUL after
 * the last byte) and *len its length. Errors as client_call. */
int client_get_bytes(struct client *cl, const char *path, char **out, size_t *len);

/* An error reply of the server that client_try_get_bytes hands back
 * instead of printing it. */
struct client_error {
    long status;        /* its HTTP status; 0: there was no error reply */
    char code[64];      /* its error code ("no_agent"), "" when it has none */
    char message[2048]; /* its message (or the start of its body), truncated */
};

/* As client_get_bytes, but an error reply of the server is not printed:
 * it goes to *err (OUT) for the caller to act on, and to print with
 * client_error_print when it gives up. A failure without such a reply
 * (no connection, timeout) is printed as always, with err->status 0.
 * Returns CLI_OK or the exit code of the error. */
int client_try_get_bytes(struct client *cl, const char *path, char **out, size_t *len,
                         struct client_error *err);

/* As client_call without an Idempotency-Key, but an error reply of the
 * server goes to *err as client_try_get_bytes hands it back. */
int client_try_call(struct client *cl, const char *method, const char *path, json_t *body,
                    enum client_retry retry, json_t **reply, struct client_error *err);

/* A follower (allot run, logs -f, events -w) waits out an allotd that
 * does not answer (a restart, an upgrade, a failover) for up to ms once
 * its retries are spent, instead of failing, once an allotd has answered
 * it: it says so on stderr when it starts waiting, and when allotd
 * answers again. */
void client_wait_outages(struct client *cl, long long ms);
#define CLI_OUTAGE_WAIT_MS (15LL * 60 * 1000)

/* Sends header line (IN, "Name: value") with the next call only. */
void client_next_header(struct client *cl, const char *line);

/* Prints e (IN) as `allot: CODE: MESSAGE`, as client_call does; returns
 * its exit code. */
int client_error_print(const struct client_error *e);

/* The value of header `name` (IN, case-insensitive) in the reply to the
 * last call, copied into buf (OUT, len bytes, truncated). Returns false,
 * buf "", when that reply had no such header. */
bool client_reply_header(struct client *cl, const char *name, char *buf, size_t len);

/* Follows pages of a list route. path has its query already (or none);
 * items_key names the array in each reply; cursor_param is the query
 * parameter of the next page; next_key names the reply's next-page value
 * (0 = last page), or NULL when the next page starts after the last
 * item's "seq" and a short page is the last. max (0: no limit) caps the
 * number of items; cursor (0: none) is where the first page starts.
 * *out receives a new array. Returns an exit code. */
int client_list(struct client *cl, const char *path, const char *items_key,
                const char *cursor_param, const char *next_key, long long cursor, size_t max,
                json_t **out);

/* A URL-escaped copy of s (free with allot_free); NULL when out of memory. */
char *client_escape(struct client *cl, const char *s);

/* ---- output.c ---- */

/* Writes v as indented JSON or as YAML (block style, strings quoted where
 * YAML would read them as something else) followed by a newline. */
void out_json(FILE *f, json_t *v);
void out_yaml(FILE *f, json_t *v);

/* Writes v in c->fmt when it is json or yaml; returns false for table. */
bool out_structured(const struct cli *c, json_t *v);

struct table;

/* A table of n_cols (at most 32) columns with the given titles (borrowed);
 * NULL when out of memory (table_row and table_print accept NULL). */
struct table *table_new(size_t n_cols, const char *const *titles);
/* Adds a row of n_cols cells (copied; NULL prints as "-"). */
void table_row(struct table *t, const char *const *cells);
/* Makes the table fit `width` display columns when printed (0: as wide
 * as its cells): the widest columns are cut first, a cut cell ends in
 * "...". For a live view on a terminal (allot top). */
void table_fit(struct table *t, size_t width);
/* Writes the table, columns separated by two spaces and aligned by
 * display width (UTF-8; wide characters take two columns), and frees it. */
void table_print(struct table *t, FILE *f);
/* Display columns of UTF-8 text s (a byte that is not UTF-8 takes one). */
size_t out_width(const char *s);
/* Cuts s in place to at most `width` display columns, ending in "..."
 * when it was cut and width allows. */
void out_cut(char *s, size_t width);

/* Text of a scalar JSON value for a table cell ("-" for null or missing);
 * formats into buf. */
const char *out_cell(json_t *v, char *buf, size_t n);
/* s made safe to print on a terminal, in buf: control characters (C0, DEL
 * and UTF-8 C1, so no escape sequence of another tenant's job name or
 * reason reaches the terminal) become '?'. Returns buf ("-" for NULL). */
const char *out_text(const char *s, char *buf, size_t n);
/* The same in place (the string keeps its length or shrinks). */
void out_defang(char *s);
/* A Unix time as UTC "2026-01-31T12:00:00Z" ("-" for 0 or missing). */
const char *out_time(json_t *v, char *buf, size_t n);

/* ---- input.c ---- */

/* Reads FILE ("-": stdin) as JSON when its name ends in .json or its first
 * non-blank byte is `{` or `[`, else as YAML (one document). YAML plain
 * scalars become integers, reals, booleans or null where they read as
 * such; quoted ones stay strings. Returns a new value, or NULL after
 * printing `allot: usage: FILE:LINE: ...`. */
json_t *input_load(const char *path);

/* The same on open stream f (IN, borrowed: read, never closed), called
 * `name` in messages; `json` says to read JSON whatever the first byte. */
json_t *input_read(FILE *f, const char *name, bool json);

/* ---- verbs ----
 * Each runs one verb: argv holds the argc arguments after the verb's name.
 * Returns an exit code (enum cli_exit), CLI_HELP after printing --help;
 * errors are printed where they are found. Pages: docs/cli/allot-VERB.md. */

int cmd_submit(struct cli *c, int argc, char **argv);
int cmd_ls(struct cli *c, int argc, char **argv);
int cmd_show(struct cli *c, int argc, char **argv);
int cmd_logs(struct cli *c, int argc, char **argv);
int cmd_run(struct cli *c, int argc, char **argv);

/* ---- shared by the job verbs (cmd_jobs.c) ---- */

/* The options of submit (also run's). */
extern const struct cli_opt jobs_submit_opts[];
/* Builds the job from the parsed options and submits it with an
 * Idempotency-Key; *reply gets the job. With one_job (allot run) an array
 * is a usage error. Returns an exit code. */
int jobs_submit(struct cli *c, struct cli_args *a, const struct cli_usage *u, bool one_job,
                json_t **reply);
/* A job id from "ID" or "ARRAYID_INDEX". Returns an exit code. */
int jobs_resolve(struct client *cl, const char *arg, long long *id);
/* True for the states a job ends in. */
bool jobs_terminal(const char *state);
int cmd_cancel(struct cli *c, int argc, char **argv);
int cmd_requeue(struct cli *c, int argc, char **argv);
int cmd_hold(struct cli *c, int argc, char **argv);
int cmd_release(struct cli *c, int argc, char **argv);
int cmd_priority(struct cli *c, int argc, char **argv);
int cmd_signal(struct cli *c, int argc, char **argv);
int cmd_time_limit(struct cli *c, int argc, char **argv);
int cmd_checkpoint(struct cli *c, int argc, char **argv);
int cmd_events(struct cli *c, int argc, char **argv);
int cmd_tenants(struct cli *c, int argc, char **argv);
/* Whether tenant `path` is in the tree the caller sees: CLI_OK,
 * CLI_NOTFOUND, or the call's error (reported). */
int tenants_known(struct cli *c, const char *path);
int cmd_quota(struct cli *c, int argc, char **argv);
int cmd_apply(struct cli *c, int argc, char **argv);
int cmd_nodes(struct cli *c, int argc, char **argv);
int cmd_scheduler(struct cli *c, int argc, char **argv);
int cmd_cordon(struct cli *c, int argc, char **argv);
int cmd_drain(struct cli *c, int argc, char **argv);
int cmd_uncordon(struct cli *c, int argc, char **argv);
int cmd_delete_node(struct cli *c, int argc, char **argv);
int cmd_usage(struct cli *c, int argc, char **argv);
int cmd_invoice(struct cli *c, int argc, char **argv);
int cmd_pricebook(struct cli *c, int argc, char **argv);
int cmd_idle(struct cli *c, int argc, char **argv);
int cmd_anomalies(struct cli *c, int argc, char **argv);
int cmd_plan(struct cli *c, int argc, char **argv);
int cmd_tokens(struct cli *c, int argc, char **argv);
int cmd_audit(struct cli *c, int argc, char **argv);
int cmd_top(struct cli *c, int argc, char **argv);

#endif
