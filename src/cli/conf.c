/*
 * Settings of the command line: which server, which token, how to print.
 * One option table (include/allot/config.h) drives the config file, the
 * global flags and their --help. Precedence, lowest first: defaults, the
 * config file ($XDG_CONFIG_HOME/allot/config, else ~/.config/allot/config,
 * or --config FILE / ALLOT_CONFIG), the environment (ALLOT_SERVER,
 * ALLOT_TOKEN, ALLOT_OUTPUT, ALLOT_CACERT), then flags. A config file that holds a token
 * and is readable by others draws a warning.
 */
#include "cli.h"

#include "allot/common.h"
#include "allot/config.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define F(x) offsetof(struct cli_conf, x)

static const char *const formats[] = {"table", "json", "yaml", "csv", "html", NULL};

static const struct allot_config_option options[] = {
    {.name = "server",
     .type = ALLOT_CFG_STRING,
     .offset = F(server),
     .def = "http://127.0.0.1:7070",
     .help = "URL of allotd (http:// or https://HOST:PORT; a bare HOST:PORT means http); "
             "several allotd sharing one store (docs/ha.md): their URLs separated by commas"},
    {.name = "token",
     .type = ALLOT_CFG_STRING,
     .offset = F(token),
     .help = "API token (allot_...); prefer ALLOT_TOKEN or the config file over the flag"},
    {.name = "cacert",
     .type = ALLOT_CFG_STRING,
     .offset = F(cacert),
     .help = "PEM file of the CA (or the self-signed certificate) allotd's HTTPS "
             "certificate is checked against; default: the system's CAs"},
    {.name = "output",
     .type = ALLOT_CFG_ENUM,
     .offset = F(output),
     .def = "table",
     .choices = formats,
     .help = "output format: table, json or yaml (csv: usage and invoice; html: invoice)"},
    {.name = "retries",
     .type = ALLOT_CFG_INT,
     .offset = F(retries),
     .def = "4",
     .min = 0,
     .max = 20,
     .help = "extra attempts after a connection error, 429 or 503"},
    {.name = "timeout",
     .type = ALLOT_CFG_DURATION,
     .offset = F(timeout),
     .def = "30s",
     .min = 100,
     .max = 3600000,
     .help = "time limit of one HTTP request"},
};

#define N_OPTIONS (sizeof(options) / sizeof(options[0]))

/* The options of the table, plus two flags that are not in the file:
 * --config and --verbose. -o is short for --output, -v for --verbose. */
bool conf_is_global(const char *name, char short_name, bool *needs_value, const char **long_name)
{
    static const struct {
        const char *name;
        char short_name;
        bool value;
    } extra[] = {{"config", 0, true}, {"verbose", 'v', false}, {"output", 'o', true}};

    for (size_t i = 0; i < sizeof(extra) / sizeof(extra[0]); i++) {
        if (name ? !strcmp(name, extra[i].name) : short_name && short_name == extra[i].short_name) {
            *needs_value = extra[i].value;
            *long_name = extra[i].name;
            return true;
        }
    }
    for (size_t i = 0; name && i < N_OPTIONS; i++) {
        if (!strcmp(name, options[i].name)) {
            *needs_value = options[i].type != ALLOT_CFG_BOOL;
            *long_name = options[i].name;
            return true;
        }
    }
    return false;
}

int conf_set(struct cli_conf *cf, const char *name, const char *value)
{
    char err[256];

    if (!strcmp(name, "verbose")) {
        cf->verbose = true;
        return 1;
    }
    if (!strcmp(name, "config"))
        return 1; /* read by conf_load before the verb's arguments */
    if (allot_config_set(options, N_OPTIONS, cf, name, value, err, sizeof(err)) < 0) {
        cli_usage_error("%s", err);
        return -CLI_USAGE;
    }
    return 1;
}

void conf_help(FILE *out)
{
    fputs("  -o, --output table|json|yaml  output format (default table; csv for usage and\n"
          "                               invoice, html for invoice)\n"
          "      --server URL[,URL...]     allotd's URL (default http://127.0.0.1:7070); "
          "several:\n"
          "                                the leader is found among them (docs/ha.md)\n"
          "      --cacert FILE             CA certificate (PEM) to check an https server with\n"
          "      --token TOKEN             API token (better: ALLOT_TOKEN or the config file)\n"
          "      --config FILE             config file (default $XDG_CONFIG_HOME/allot/config,\n"
          "                                else ~/.config/allot/config)\n"
          "      --retries N               extra attempts after a failure that may be retried\n"
          "                                (a connection error, 429, 503; 0..20, default 4)\n"
          "      --timeout DURATION        time limit of one request (default 30s)\n"
          "  -v, --verbose                 print each request and retry on stderr\n"
          "  -h, --help                    this help\n",
          out);
}

/* The default config file, or NULL when there is no home. */
static char *default_path(void)
{
    const char *xdg = getenv("XDG_CONFIG_HOME"), *home = getenv("HOME");
    char buf[4096];

    if (xdg && *xdg)
        allot_fmt(buf, sizeof(buf), "%s/allot/config", xdg);
    else if (home && *home) /* "/" is a home too (a tenant's own uid): no "//" */
        allot_fmt(buf, sizeof(buf), "%s/.config/allot/config", strcmp(home, "/") ? home : "");
    else
        return NULL;
    return allot_strdup(buf);
}

static int env_set(struct cli_conf *cf, const char *var, const char *name)
{
    const char *v = getenv(var);
    char err[256];

    if (!v || !*v)
        return CLI_OK;
    if (allot_config_set(options, N_OPTIONS, cf, name, v, err, sizeof(err)) < 0)
        return cli_usage_error("%s: %s", var, err);
    return CLI_OK;
}

int conf_load(struct cli_conf *cf, const char *config_path)
{
    char err[512];
    char *path = NULL;
    bool must_exist = true;
    struct stat sb;
    int rc = CLI_OK;

    memset(cf, 0, sizeof(*cf));
    if (allot_config_defaults(options, N_OPTIONS, cf, err, sizeof(err)) < 0)
        return cli_usage_error("%s", err);
    if (!config_path) {
        config_path = getenv("ALLOT_CONFIG");
        if (config_path && !*config_path)
            config_path = NULL;
    }
    if (config_path) {
        path = allot_strdup(config_path);
    } else {
        path = default_path();
        must_exist = false;
    }
    if (path && stat(path, &sb) == 0) {
        char *before = cf->token ? allot_strdup(cf->token) : NULL;

        if (allot_config_load_file(options, N_OPTIONS, cf, path, err, sizeof(err)) < 0)
            rc = cli_usage_error("%s", err);
        else if (cf->token && (!before || strcmp(before, cf->token) != 0) && (sb.st_mode & 077))
            fprintf(stderr,
                    "allot: warning: %s holds a token and is readable by others "
                    "(chmod 600 it)\n",
                    path);
        allot_free(before);
    } else if (path && must_exist) {
        rc = cli_usage_error("cannot read config file %s", path);
    }
    if (path)
        cf->config = path;
    if (rc == CLI_OK)
        rc = env_set(cf, "ALLOT_SERVER", "server");
    if (rc == CLI_OK)
        rc = env_set(cf, "ALLOT_TOKEN", "token");
    if (rc == CLI_OK)
        rc = env_set(cf, "ALLOT_OUTPUT", "output");
    if (rc == CLI_OK)
        rc = env_set(cf, "ALLOT_CACERT", "cacert");
    return rc;
}

void conf_free(struct cli_conf *cf)
{
    allot_config_free(options, N_OPTIONS, cf);
    allot_free(cf->config);
    cf->config = NULL;
}
