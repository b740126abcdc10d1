/*
 * Administrative verbs: `nodes` (GET /v1/nodes), `cordon`, `drain` and
 * `uncordon` (POST /v1/nodes/{name}/...), `tokens create|ls|revoke`
 * (POST, GET /v1/tokens, DELETE /v1/tokens/{id}) and `audit ls|verify`
 * (GET /v1/audit, /v1/audit/verify), `scheduler` (GET /v1/scheduler).
 *
 * `tokens create` prints the new secret as the last line of its output
 * (it is shown only once; scripts take `tail -n 1`). `audit verify` exits
 * with CLI_AUDIT_BAD when the server finds the hash chain broken.
 */
#include "cli.h"

#include "allot/cluster.h"
#include "allot/common.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const struct cli_opt no_opts[] = {{NULL, 0, NULL, NULL}};

/* ---- scheduler ---- */

static const struct cli_usage scheduler_usage = {
    "scheduler", "",
    "Shows the scheduling options allotd runs with (docs/allotd.md), as allotd's\n"
    "options: the queue order and placement, preemption, fair-share reclaim and\n"
    "cap, reservations, aging, the LAS split, the lending hold and defragmentation."};

/* The reply's fields as allotd's options, with their units. */
static const struct {
    const char *key, *option, *unit;
} sched_fields[] = {
    {"order", "order", ""},
    {"placement", "placement", ""},
    {"preempt_grace_s", "preempt-grace", "s"},
    {"preempt_min_runtime_s", "preempt-min-runtime", "s"},
    {"fair_reclaim_s", "fair-reclaim", "s (0s: off)"},
    {"fair_cap_percent", "fair-cap", " % of the fair share (0: off)"},
    {"reserve_gangs", "reserve-gangs", ""},
    {"large_gang_gpus", "large-gang-gpus", " GPUs"},
    {"aging_s", "aging", "s (0s: off)"},
    {"las_threshold_gpu_s", "las-threshold", "s of GPU-time (0s: off)"},
    {"lending_hold_s", "lending-hold", "s (0s: off)"},
    {"defrag_s", "defrag-interval", "s (0s: off)"},
    {"defrag_loss_s", "defrag-loss", "s of work a moved job may lose"},
};

int cmd_scheduler(struct cli *c, int argc, char **argv)
{
    static const char *const titles[] = {"OPTION", "VALUE"};
    struct cli_args a;
    struct client *cl;
    json_t *r = NULL;
    int rc = args_parse(c, no_opts, &scheduler_usage, argc, argv, &a);

    if (rc != CLI_OK)
        return rc;
    if (a.n_pos) {
        rc = cli_usage_error("allot scheduler takes no arguments (got %s)", a.pos[0]);
        goto out;
    }
    if (!(cl = cli_client(c))) {
        rc = CLI_USAGE;
        goto out;
    }
    rc = client_call(cl, "GET", "/v1/scheduler", NULL, NULL, CLIENT_RETRY_ALWAYS, &r, NULL);
    if (rc != CLI_OK || out_structured(c, r))
        goto out;
    struct table *t = table_new(2, titles);
    for (size_t i = 0; i < sizeof(sched_fields) / sizeof(sched_fields[0]); i++) {
        json_t *v = json_object_get(r, sched_fields[i].key);
        char val[96], cell[64];

        if (!v)
            continue; /* a field this allot does not know of is in -o json */
        allot_fmt(val, sizeof(val), "%s%s", out_cell(v, cell, sizeof(cell)),
                  json_is_boolean(v) ? "" : sched_fields[i].unit);
        const char *cells[2] = {sched_fields[i].option, val};
        table_row(t, cells);
    }
    table_print(t, stdout);
out:
    json_decref(r);
    args_free(&a);
    return rc;
}

/* ---- nodes ---- */

static const struct cli_opt nodes_opts[] = {
    {"gpus", 'g', NULL, "one line per GPU: UUID, health and its MIG instances"},
    {"labels", 'L', NULL, "a LABELS column: the node's labels (allot-agent --labels)"},
    {"constraint", 'C', "K=V[,K=V]",
     "only the nodes carrying these labels: where a job submitted with this --constraint may run "
     "(repeatable)"},
    {NULL, 0, NULL, NULL}};

static const struct cli_usage nodes_usage = {
    "nodes", "[--gpus] [--labels] [--constraint K=V] [NAME...]",
    "Lists registered nodes: state, GPU model and count, GPU health as the\n"
    "agent last reported it, CPUs, memory, tasks and the last heartbeat.\n"
    "With --gpus: one line per GPU with its health and MIG layout. NAME\n"
    "limits the list to those nodes, --constraint to those with the labels."};

/* Keeps in nodes those whose labels hold every K=V of --constraint (as
 * allot submit reads it: args_constraint). */
static int nodes_select(struct cli_args *a, json_t *nodes)
{
    size_t n;
    const char *const *v = args_all(a, "constraint", &n);
    struct allot_label l[ALLOT_MAX_SELECT];
    char *buf;
    int m = args_constraint(v, n, &buf, l);

    for (size_t i = json_array_size(nodes); m > 0 && i-- > 0;) {
        json_t *have =
            json_object_get(json_object_get(json_array_get(nodes, i), "inventory"), "labels");
        bool all = true;
        for (int j = 0; j < m && all; j++) {
            const char *hv = json_string_value(json_object_get(have, l[j].key));
            all = hv && !strcmp(hv, l[j].value);
        }
        if (!all)
            json_array_remove(nodes, i);
    }
    free(buf);
    return m < 0 ? -m : CLI_OK;
}

/* "zone=b,nvlink" from a node's labels (the agent's allot.io/ ones left
 * out), or "-". */
static const char *labels_cell(json_t *node, char *buf, size_t len)
{
    const char *k;
    json_t *v;
    size_t at = 0;

    buf[0] = '\0';
    json_object_foreach(json_object_get(json_object_get(node, "inventory"), "labels"), k, v)
    {
        if (!strncmp(k, "allot.io/", 9) || at >= len)
            continue;
        at += (size_t)allot_fmt(buf + at, len - at, "%s%s%s%s", at ? "," : "", k,
                                *json_string_value(v) ? "=" : "", json_string_value(v));
    }
    return *buf ? buf : "-";
}

/* "ok", "1 unhealthy", "2 degraded" or "-" (no report yet). */
static const char *health_cell(json_t *node, char *buf, size_t len)
{
    json_t *gpus = json_object_get(json_object_get(node, "health"), "gpus"), *g;
    size_t i, bad = 0, degraded = 0;

    if (!json_is_array(gpus))
        return "-";
    json_array_foreach(gpus, i, g)
    {
        const char *h = json_string_value(json_object_get(g, "health"));
        bad += h && !strcmp(h, "unhealthy");
        degraded += h && !strcmp(h, "degraded");
    }
    if (bad)
        allot_fmt(buf, len, "%zu unhealthy", bad);
    else if (degraded)
        allot_fmt(buf, len, "%zu degraded", degraded);
    else
        allot_fmt(buf, len, "ok");
    return buf;
}

/* One line per GPU. A node whose agent has not reported GPU health yet
 * (`health` null: registered, no heartbeat with health) lists the GPUs of
 * its inventory, with health, MIG and why as "-". */
static void gpus_table(json_t *nodes)
{
    static const char *const titles[] = {"NODE", "GPU", "MODEL", "UUID", "HEALTH", "MIG", "WHY"};
    struct table *t = table_new(7, titles);
    json_t *x, *g, *m;
    size_t i, k, j;

    json_array_foreach(nodes, i, x)
    {
        json_t *health = json_object_get(json_object_get(x, "health"), "gpus");
        bool reported = json_array_size(health) > 0;

        json_array_foreach(
            reported ? health : json_object_get(json_object_get(x, "inventory"), "gpus"), k, g)
        {
            char idx[16], mig[512] = "";
            json_array_foreach(json_object_get(g, "mig"), j, m)
            {
                size_t ml = strlen(mig);
                allot_fmt(mig + ml, sizeof(mig) - ml, "%s%s@%lld", ml ? "," : "",
                          json_string_value(json_object_get(m, "profile")),
                          (long long)json_integer_value(json_object_get(m, "start")));
            }
            /* an inventory entry has no index: its place in the list is */
            allot_fmt(idx, sizeof(idx), "%zu", k);
            const char *cells[7] = {
                json_string_value(json_object_get(x, "name")),
                reported ? out_cell(json_object_get(g, "index"), idx, sizeof(idx)) : idx,
                json_string_value(json_object_get(g, "model")),
                json_string_value(json_object_get(g, "uuid")),
                json_string_value(json_object_get(g, "health")),
                *mig ? mig : "-",
                json_string_value(json_object_get(g, "text"))};
            table_row(t, cells);
        }
    }
    table_print(t, stdout);
}

int cmd_nodes(struct cli *c, int argc, char **argv)
{
    static const char *const titles[] = {"NAME",  "STATE",          "MODEL", "GPUS",
                                         "MODE",  "HEALTH",         "CPUS",  "MEMORY",
                                         "TASKS", "LAST-HEARTBEAT", "LABELS"};
    struct cli_args a;
    struct client *cl;
    json_t *r = NULL, *nodes, *x;
    size_t i;
    int rc = args_parse(c, nodes_opts, &nodes_usage, argc, argv, &a);

    if (rc != CLI_OK)
        return rc;
    if (args_has(&a, "gpus") && args_has(&a, "labels")) {
        rc = cli_usage_error("--gpus lists GPUs, --labels is a column of the node list: give one");
        goto out;
    }
    if (!(cl = cli_client(c))) {
        rc = CLI_USAGE;
        goto out;
    }
    rc = client_call(cl, "GET", "/v1/nodes", NULL, NULL, CLIENT_RETRY_ALWAYS, &r, NULL);
    if (rc != CLI_OK)
        goto out;
    nodes = json_object_get(r, "nodes");
    if (a.n_pos) {
        for (i = json_array_size(nodes); i-- > 0;) {
            const char *name = json_string_value(json_object_get(json_array_get(nodes, i), "name"));
            bool want = false;
            for (size_t k = 0; k < a.n_pos && !want; k++)
                want = name && !strcmp(name, a.pos[k]);
            if (!want)
                json_array_remove(nodes, i);
        }
        /* name the first one asked for that is not there */
        for (size_t k = 0; k < a.n_pos && rc == CLI_OK; k++) {
            bool found = false;
            json_array_foreach(nodes, i, x)
            {
                const char *nm = json_string_value(json_object_get(x, "name"));
                found |= nm && !strcmp(nm, a.pos[k]);
            }
            if (!found) {
                cli_error("not_found", "no such node: %s", a.pos[k]);
                rc = CLI_NOTFOUND;
            }
        }
        if (rc != CLI_OK)
            goto out;
    }
    if ((rc = nodes_select(&a, nodes)) != CLI_OK || out_structured(c, nodes))
        goto out;
    if (args_has(&a, "gpus")) {
        gpus_table(nodes);
        goto out;
    }
    bool labels = args_has(&a, "labels");
    struct table *t = table_new(labels ? 11 : 10, titles);
    json_array_foreach(nodes, i, x)
    {
        json_t *inv = json_object_get(x, "inventory");
        json_t *gpus = json_object_get(inv, "gpus");
        char n[16], cpus[32], mem[32], hb[32], tasks[16], health[32], state[48], lab[4096];

        allot_fmt(n, sizeof(n), "%zu", json_array_size(gpus));
        /* fenced: an unhealthy GPU keeps new work off the node (the reason is in -o json) */
        allot_fmt(state, sizeof(state), "%s%s", json_string_value(json_object_get(x, "state")),
                  json_is_string(json_object_get(x, "fenced")) ? ",fenced" : "");
        allot_fmt(mem, sizeof(mem), "%lldMiB",
                  (long long)json_integer_value(json_object_get(inv, "memory")));
        const char *mode = json_string_value(json_object_get(inv, "gpu_mode"));
        const char *cells[11] = {
            json_string_value(json_object_get(x, "name")),
            state,
            json_string_value(json_object_get(json_array_get(gpus, 0), "model")),
            n,
            json_array_size(gpus) ? (mode ? mode : "shared") : "-",
            health_cell(x, health, sizeof(health)),
            out_cell(json_object_get(inv, "cpus"), cpus, sizeof(cpus)),
            mem,
            out_cell(json_object_get(x, "tasks"), tasks, sizeof(tasks)),
            out_time(json_object_get(x, "last_heartbeat"), hb, sizeof(hb)),
            labels_cell(x, lab, sizeof(lab))};
        table_row(t, cells);
    }
    table_print(t, stdout);
out:
    json_decref(r);
    args_free(&a);
    return rc;
}

/* ---- cordon, drain, uncordon ---- */

static const struct cli_usage cordon_usage = {
    "cordon", "NODE...",
    "Cordons nodes (admin): no new jobs are placed there; running jobs stay.\n"
    "A NODE may be a Slurm host list (gpu[01-04,07])."};

static const struct cli_opt drain_opts[] = {
    {"evict", 0, NULL, "also take the nodes' jobs off them now: they queue again (kubectl drain)"},
    {"wait", 'w', NULL, "wait until every node is drained (no task left)"},
    {"timeout", 0, "DURATION", "with --wait: give up after this long (default 1h)"},
    {NULL, 0, NULL, NULL}};

static const struct cli_usage drain_usage = {
    "drain", "NODE... [--evict] [--wait [--timeout DURATION]]",
    "Drains nodes (admin): no new jobs are placed there; running jobs finish,\n"
    "then the node shows as drained. With --evict the jobs are taken off the\n"
    "nodes at once and queue again (their agents stop them with the grace).\n"
    "With --wait, returns once every node is drained (exit 4 when the timeout\n"
    "comes first). A NODE may be a Slurm host list (gpu[01-04,07])."};

static const struct cli_usage uncordon_usage = {
    "uncordon", "NODE...",
    "Makes cordoned or draining nodes ready for new jobs again (admin).\n"
    "A NODE may be a Slurm host list (gpu[01-04,07])."};

static const struct cli_usage delete_node_usage = {
    "delete-node", "NODE...",
    "Removes decommissioned nodes (admin): a node that is lost (its agent\n"
    "stopped, no heartbeat within the lease) is forgotten, its GPUs no longer\n"
    "count in the cluster's capacity, and its own node credential is revoked.\n"
    "Its jobs' history and usage stay. A node whose agent still runs is\n"
    "refused (the agent would register it again): drain it (allot drain\n"
    "--wait NODE), stop allot-agent there, then delete it once `allot nodes`\n"
    "shows it lost. The same name registered later is a new node. A NODE may\n"
    "be a Slurm host list (gpu[01-04,07])."};

/* POST /v1/nodes/{name}/ACTION for every name (the same state set twice is
 * harmless, so a lost reply may be repeated), or DELETE /v1/nodes/{name}. */
static int drain_wait(struct cli *c, const struct cli_args *a, json_t *names);

/* The node names of a's arguments, each a name or a Slurm host list
 * (gpu[01-04]), in order, none twice (args_hosts), into the new array
 * *names. CLI_OK or CLI_USAGE (printed). */
static int node_names(const struct cli_args *a, json_t **names)
{
    json_t *seen = json_object();
    char where[320];
    int rc = CLI_OK;

    *names = json_array();
    if (!seen || !*names)
        rc = cli_usage_error("out of memory");
    for (size_t i = 0; i < a->n_pos && rc == CLI_OK; i++) {
        allot_fmt(where, sizeof(where), "node \"%.256s\"", a->pos[i]);
        rc = args_hosts(*names, seen, a->pos[i], where);
    }
    json_decref(seen);
    return rc;
}

static int node_state(struct cli *c, const struct cli_usage *u, const struct cli_opt *opts,
                      const char *action, int argc, char **argv)
{
    struct cli_args a;
    json_t *all = NULL;
    json_t *names = NULL;
    int rc = args_parse(c, opts, u, argc, argv, &a), first_err = CLI_OK;

    if (rc != CLI_OK)
        return rc;
    if (!a.n_pos) {
        rc = cli_usage_error("allot %s NODE...", u->verb);
        goto out;
    }
    if (args_get(&a, "timeout") && !args_has(&a, "wait")) {
        rc = cli_usage_error("--timeout is how long --wait waits: give --wait too");
        goto out;
    }
    if ((rc = node_names(&a, &names)) != CLI_OK)
        goto out;
    if (!cli_client(c)) {
        rc = CLI_USAGE;
        goto out;
    }
    all = json_array();
    for (size_t i = 0; i < json_array_size(names); i++) {
        const char *name = json_string_value(json_array_get(names, i));
        char path[512], *esc = client_escape(c->http, name);
        json_t *r = NULL;

        /* one literal path per route: tests check them against allotd's */
        if (!strcmp(action, "cordon"))
            allot_fmt(path, sizeof(path), "/v1/nodes/%s/cordon", esc ? esc : "");
        else if (!strcmp(action, "drain") && args_has(&a, "evict"))
            allot_fmt(path, sizeof(path), "/v1/nodes/%s/drain?evict=true", esc ? esc : "");
        else if (!strcmp(action, "drain"))
            allot_fmt(path, sizeof(path), "/v1/nodes/%s/drain", esc ? esc : "");
        else if (!strcmp(action, "delete"))
            allot_fmt(path, sizeof(path), "/v1/nodes/%s", esc ? esc : "");
        else
            allot_fmt(path, sizeof(path), "/v1/nodes/%s/uncordon", esc ? esc : "");
        allot_free(esc);
        /* a deletion repeated after a lost reply would find no node */
        if (!strcmp(action, "delete"))
            rc = client_call(c->http, "DELETE", path, NULL, NULL, CLIENT_RETRY_CONNECT, &r, NULL);
        else
            rc = client_call(c->http, "POST", path, NULL, NULL, CLIENT_RETRY_ALWAYS, &r, NULL);
        if (rc != CLI_OK) {
            if (first_err == CLI_OK)
                first_err = rc;
            continue;
        }
        if (c->fmt == CLI_FMT_TABLE && json_object_get(r, "returns_as"))
            printf("node %s lost: it returns %s\n", name,
                   json_string_value(json_object_get(r, "returns_as")));
        else if (c->fmt == CLI_FMT_TABLE)
            printf("node %s %s (was %s)\n", name, json_string_value(json_object_get(r, "state")),
                   json_string_value(json_object_get(r, "previous")));
        json_array_append_new(all, r);
    }
    if (c->fmt != CLI_FMT_TABLE && json_array_size(all))
        out_structured(c, json_array_size(names) == 1 ? json_array_get(all, 0) : all);
    rc = first_err;
    /* what was done shows before a --wait that may take hours, also when
     * stdout is a pipe or a file (fully buffered) */
    fflush(stdout);
    if (rc == CLI_OK && args_has(&a, "wait"))
        rc = drain_wait(c, &a, names);
out:
    json_decref(all);
    json_decref(names);
    args_free(&a);
    return rc;
}

/* Polls GET /v1/nodes once a second until every node of names is
 * drained (a gives --timeout); CLI_CONFLICT when the timeout comes first. */
static int drain_wait(struct cli *c, const struct cli_args *a, json_t *names)
{
    int64_t timeout = 3600;
    const char *s = args_get(a, "timeout");
    int rc;

    if (s && (rc = args_seconds("timeout", s, &timeout)) != CLI_OK)
        return rc;
    for (int64_t waited = 0;; waited++) {
        json_t *r = NULL, *x;
        size_t i, left = 0, tasks = 0;

        rc = client_call(c->http, "GET", "/v1/nodes", NULL, NULL, CLIENT_RETRY_ALWAYS, &r, NULL);
        if (rc != CLI_OK)
            return rc;
        json_array_foreach(json_object_get(r, "nodes"), i, x)
        {
            const char *name = json_string_value(json_object_get(x, "name"));
            const char *st = json_string_value(json_object_get(x, "state"));
            for (size_t k = 0; k < json_array_size(names); k++)
                /* a lost node runs nothing of allot's: its jobs were requeued */
                if (name && !strcmp(name, json_string_value(json_array_get(names, k))) &&
                    (!st || (strcmp(st, "drained") != 0 && strcmp(st, "lost") != 0))) {
                    left++;
                    tasks += (size_t)json_integer_value(json_object_get(x, "tasks"));
                }
        }
        json_decref(r);
        if (!left) {
            if (c->fmt == CLI_FMT_TABLE)
                printf("drained\n");
            return CLI_OK;
        }
        if (waited >= timeout) {
            cli_error("timeout", "%zu node%s not drained after %llds (%zu task%s left)", left,
                      left > 1 ? "s" : "", (long long)timeout, tasks, tasks == 1 ? "" : "s");
            return CLI_CONFLICT;
        }
        sleep(1);
    }
}

int cmd_cordon(struct cli *c, int argc, char **argv)
{
    return node_state(c, &cordon_usage, no_opts, "cordon", argc, argv);
}

int cmd_drain(struct cli *c, int argc, char **argv)
{
    return node_state(c, &drain_usage, drain_opts, "drain", argc, argv);
}

int cmd_uncordon(struct cli *c, int argc, char **argv)
{
    return node_state(c, &uncordon_usage, no_opts, "uncordon", argc, argv);
}

int cmd_delete_node(struct cli *c, int argc, char **argv)
{
    return node_state(c, &delete_node_usage, no_opts, "delete", argc, argv);
}

/* ---- tokens ---- */

static const struct cli_opt create_opts[] = {
    {"role", 'r', "ROLE", "admin, tenant-admin, member, viewer or agent (required)"},
    {"tenant", 't', "PATH",
     "tenant subtree the token is bound to (needed by member, "
     "tenant-admin)"},
    {"name", 'n', "NAME", "a name to recognise the token by"},
    {"duration", 'd', "DURATION",
     "how long the token is valid (seconds, or with s/m/h/d; at most 3650d); "
     "without it, until revoked"},
    {NULL, 0, NULL, NULL}};

static const struct cli_usage create_usage = {
    "tokens create", "--role ROLE [--tenant PATH] [--name NAME] [--duration DURATION]",
    "Creates an API token and prints it as the last line of the output. The\n"
    "secret is shown only this once; the server keeps only its hash."};

static const struct cli_usage tls_usage = {
    "tokens ls", "", "Lists tokens (never their secrets): id, name, role, tenant, times."};

static const struct cli_usage revoke_usage = {"tokens revoke", "TOKEN_ID...",
                                              "Revokes tokens by id; they stop working at once."};

static const struct cli_usage tokens_usage = {
    "tokens", "create|ls|revoke ...",
    "Manages API tokens:\n"
    "  allot tokens create --role ROLE [--tenant PATH] [--name NAME] [--duration DURATION]\n"
    "  allot tokens ls\n"
    "  allot tokens revoke TOKEN_ID...\n"
    "See `allot tokens SUBCOMMAND --help`."};

static int tokens_create(struct cli *c, int argc, char **argv)
{
    struct cli_args a;
    json_t *body = NULL, *r = NULL;
    const char *s;
    int rc = args_parse(c, create_opts, &create_usage, argc, argv, &a);

    if (rc != CLI_OK)
        return rc;
    if (a.n_pos || !args_get(&a, "role")) {
        rc = cli_usage_error("allot tokens create --role ROLE [--tenant PATH] [--name NAME] "
                             "[--duration DURATION]");
        goto out;
    }
    body = json_pack("{s:s}", "role", args_get(&a, "role"));
    if ((s = args_get(&a, "duration"))) {
        int64_t secs;
        if ((rc = args_seconds("duration", s, &secs)) != CLI_OK)
            goto out;
        json_object_set_new(body, "duration_s", json_integer(secs));
    }
    if ((s = args_get(&a, "tenant")))
        json_object_set_new(body, "tenant", json_string(s));
    if ((s = args_get(&a, "name")))
        json_object_set_new(body, "name", json_string(s));
    if (!cli_client(c)) {
        rc = CLI_USAGE;
        goto out;
    }
    /* not repeated after a lost reply: a repeat would make a second token */
    rc = client_call(c->http, "POST", "/v1/tokens", body, NULL, CLIENT_RETRY_CONNECT, &r, NULL);
    if (rc != CLI_OK || out_structured(c, r))
        goto out;
    char b[32];
    printf("id:     %s\n", out_cell(json_object_get(r, "id"), b, sizeof(b)));
    printf("role:   %s\n", json_string_value(json_object_get(r, "role")));
    printf("tenant: %s\n", out_cell(json_object_get(r, "tenant"), b, sizeof(b)));
    if (json_integer_value(json_object_get(r, "expires")))
        printf("expires: %s\n", out_time(json_object_get(r, "expires"), b, sizeof(b)));
    printf("%s\n", json_string_value(json_object_get(r, "token")));
out:
    json_decref(r);
    json_decref(body);
    args_free(&a);
    return rc;
}

static int tokens_ls(struct cli *c, int argc, char **argv)
{
    static const char *const titles[] = {"ID",      "NAME",    "ROLE",   "TENANT",
                                         "CREATED", "REVOKED", "EXPIRES"};
    struct cli_args a;
    json_t *r = NULL, *x;
    size_t i;
    int rc = args_parse(c, no_opts, &tls_usage, argc, argv, &a);

    if (rc != CLI_OK)
        return rc;
    if (a.n_pos) {
        rc = cli_usage_error("allot tokens ls");
        goto out;
    }
    if (!cli_client(c)) {
        rc = CLI_USAGE;
        goto out;
    }
    rc = client_call(c->http, "GET", "/v1/tokens", NULL, NULL, CLIENT_RETRY_ALWAYS, &r, NULL);
    if (rc != CLI_OK || out_structured(c, json_object_get(r, "tokens")))
        goto out;
    struct table *t = table_new(7, titles);
    json_array_foreach(json_object_get(r, "tokens"), i, x)
    {
        char id[32], cr[32], rv[32], ex[32];
        const char *cells[7] = {out_cell(json_object_get(x, "id"), id, sizeof(id)),
                                json_string_value(json_object_get(x, "name")),
                                json_string_value(json_object_get(x, "role")),
                                json_string_value(json_object_get(x, "tenant")),
                                out_time(json_object_get(x, "created"), cr, sizeof(cr)),
                                out_time(json_object_get(x, "revoked"), rv, sizeof(rv)),
                                out_time(json_object_get(x, "expires"), ex, sizeof(ex))};
        table_row(t, cells);
    }
    table_print(t, stdout);
out:
    json_decref(r);
    args_free(&a);
    return rc;
}

static int tokens_revoke(struct cli *c, int argc, char **argv)
{
    struct cli_args a;
    json_t *all = NULL;
    int rc = args_parse(c, no_opts, &revoke_usage, argc, argv, &a), first_err = CLI_OK;

    if (rc != CLI_OK)
        return rc;
    if (!a.n_pos) {
        rc = cli_usage_error("allot tokens revoke TOKEN_ID...");
        goto out;
    }
    for (size_t i = 0; i < a.n_pos; i++) {
        int64_t id;
        if ((rc = args_int("token id", a.pos[i], 1, INT64_MAX, &id)) != CLI_OK)
            goto out;
    }
    if (!cli_client(c)) {
        rc = CLI_USAGE;
        goto out;
    }
    all = json_array();
    for (size_t i = 0; i < a.n_pos; i++) {
        char path[64];
        json_t *r = NULL;

        allot_fmt(path, sizeof(path), "/v1/tokens/%s", a.pos[i]);
        rc = client_call(c->http, "DELETE", path, NULL, NULL, CLIENT_RETRY_CONNECT, &r, NULL);
        if (rc != CLI_OK) {
            if (first_err == CLI_OK)
                first_err = rc;
            continue;
        }
        if (c->fmt == CLI_FMT_TABLE)
            printf("revoked token %s\n", a.pos[i]);
        json_array_append_new(all, r);
    }
    if (c->fmt != CLI_FMT_TABLE && json_array_size(all))
        out_structured(c, a.n_pos == 1 ? json_array_get(all, 0) : all);
    rc = first_err;
out:
    json_decref(all);
    args_free(&a);
    return rc;
}

/* Runs subcommand argv[0] of a verb with subcommands. */
struct sub {
    const char *name, *alias;
    int (*run)(struct cli *c, int argc, char **argv);
};

static int dispatch(struct cli *c, const struct sub *subs, const struct cli_usage *u, int argc,
                    char **argv)
{
    if (argc < 1 || !strcmp(argv[0], "-h") || !strcmp(argv[0], "--help")) {
        args_help(no_opts, u, argc < 1 ? stderr : stdout);
        return argc < 1 ? CLI_USAGE : CLI_HELP;
    }
    for (const struct sub *s = subs; s->name; s++)
        if (!strcmp(argv[0], s->name) || (s->alias && !strcmp(argv[0], s->alias)))
            return s->run(c, argc - 1, argv + 1);
    return cli_usage_error("unknown subcommand `allot %s %s` (see allot %s --help)", u->verb,
                           argv[0], u->verb);
}

int cmd_tokens(struct cli *c, int argc, char **argv)
{
    static const struct sub subs[] = {{"create", NULL, tokens_create},
                                      {"ls", "list", tokens_ls},
                                      {"revoke", "rm", tokens_revoke},
                                      {NULL, NULL, NULL}};
    return dispatch(c, subs, &tokens_usage, argc, argv);
}

/* ---- audit ---- */

static const struct cli_opt als_opts[] = {
    {"after", 0, "SEQ", "only entries after this sequence number"},
    {"limit", 0, "N", "at most N entries (default: all)"},
    {NULL, 0, NULL, NULL}};

static const struct cli_usage als_usage = {
    "audit ls", "[--after SEQ] [--limit N]",
    "Lists audit log entries in order: who (token id), action, target, result\n"
    "and the entry's hash in the chain."};

static const struct cli_usage verify_usage = {
    "audit verify", "",
    "Asks the server to check the audit log's hash chain. Exits 0 when it is\n"
    "intact, 7 when an entry was edited, inserted or deleted."};

static const struct cli_usage audit_usage = {"audit", "ls|verify ...",
                                             "The audit log (admin only):\n"
                                             "  allot audit ls [--after SEQ] [--limit N]\n"
                                             "  allot audit verify"};

static int audit_ls(struct cli *c, int argc, char **argv)
{
    static const char *const titles[] = {"SEQ", "TIME", "TOKEN", "ACTION", "TARGET", "RESULT"};
    struct cli_args a;
    json_t *all = NULL, *x;
    const char *s;
    int64_t after = 0, limit = 0;
    size_t i;
    int rc = args_parse(c, als_opts, &als_usage, argc, argv, &a);

    if (rc != CLI_OK)
        return rc;
    if (a.n_pos) {
        rc = cli_usage_error("allot audit ls [--after SEQ] [--limit N]");
        goto out;
    }
    if (((s = args_get(&a, "after")) && (rc = args_int("after", s, 0, INT64_MAX, &after))) ||
        ((s = args_get(&a, "limit")) && (rc = args_int("limit", s, 1, INT64_MAX, &limit))))
        goto out;
    if (!cli_client(c)) {
        rc = CLI_USAGE;
        goto out;
    }
    rc = client_list(c->http, "/v1/audit", "entries", "after", "next_after", (long long)after,
                     (size_t)limit, &all);
    if (rc != CLI_OK || out_structured(c, all))
        goto out;
    struct table *t = table_new(6, titles);
    json_array_foreach(all, i, x)
    {
        char sq[32], tm[32], tk[32];
        const char *cells[6] = {out_cell(json_object_get(x, "seq"), sq, sizeof(sq)),
                                out_time(json_object_get(x, "time"), tm, sizeof(tm)),
                                out_cell(json_object_get(x, "token_id"), tk, sizeof(tk)),
                                json_string_value(json_object_get(x, "action")),
                                json_string_value(json_object_get(x, "target")),
                                json_string_value(json_object_get(x, "result"))};
        table_row(t, cells);
    }
    table_print(t, stdout);
out:
    json_decref(all);
    args_free(&a);
    return rc;
}

static int audit_verify(struct cli *c, int argc, char **argv)
{
    struct cli_args a;
    json_t *r = NULL;
    int rc = args_parse(c, no_opts, &verify_usage, argc, argv, &a);

    if (rc != CLI_OK)
        return rc;
    if (a.n_pos) {
        rc = cli_usage_error("allot audit verify");
        goto out;
    }
    if (!cli_client(c)) {
        rc = CLI_USAGE;
        goto out;
    }
    rc = client_call(c->http, "GET", "/v1/audit/verify", NULL, NULL, CLIENT_RETRY_ALWAYS, &r, NULL);
    if (rc != CLI_OK)
        goto out;
    bool ok = json_is_true(json_object_get(r, "ok"));
    if (!out_structured(c, r)) {
        char b[32];
        if (ok)
            printf("audit log intact: %s entries, head %s\n",
                   out_cell(json_object_get(r, "entries"), b, sizeof(b)),
                   json_string_value(json_object_get(r, "head")));
        else
            printf("audit log BROKEN at entry %s: %s\n",
                   out_cell(json_object_get(r, "bad_seq"), b, sizeof(b)),
                   json_string_value(json_object_get(r, "why")));
    }
    if (!ok) {
        cli_error("audit_broken", "the audit log's hash chain does not verify");
        rc = CLI_AUDIT_BAD;
    }
out:
    json_decref(r);
    args_free(&a);
    return rc;
}

int cmd_audit(struct cli *c, int argc, char **argv)
{
    static const struct sub subs[] = {
        {"ls", "list", audit_ls}, {"verify", NULL, audit_verify}, {NULL, NULL, NULL}};
    return dispatch(c, subs, &audit_usage, argc, argv);
}
