/*
 * `allot logs [-f] [--task N] JOB`: a task's output, read through allotd
 * (GET /v1/jobs/{id}/logs, which reads it from the node's agent), from the
 * start or, with --follow, until the job has ended. A job that is not
 * placed now but ran before (pending again, or cancelled while it waited)
 * shows its last run's log, with a line on stderr saying so. `allot run`:
 * submit, wait, stream task 0's output and exit with the job's exit code,
 * as `srun` does.
 */
#include "cli.h"

#include "allot/common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void sleep_ms(long ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};

    nanosleep(&ts, NULL);
}

static int get_job(struct client *cl, long long id, json_t **job)
{
    char path[64];

    allot_fmt(path, sizeof(path), "/v1/jobs/%lld", id);
    return client_call(cl, "GET", path, NULL, NULL, CLIENT_RETRY_ALWAYS, job, NULL);
}

/* Prints the job's task output. With follow, waits for it to start and
 * prints what comes until it ended. *final gets the job as it ended (or
 * as last read). Returns an exit code. */
static int stream(struct client *cl, long long id, long long task, bool follow, json_t **final)
{
    long long offset = 0;
    json_t *job = NULL;
    int rc;

    *final = NULL;
    /* wait for a place to read from: the task has started or it ended */
    for (;;) {
        const char *st;

        json_decref(job);
        job = NULL;
        if ((rc = get_job(cl, id, &job)) != CLI_OK)
            return rc;
        st = json_string_value(json_object_get(job, "state"));
        if (!follow || (st && strcmp(st, "pending") != 0 && strcmp(st, "starting") != 0) ||
            jobs_terminal(st))
            break;
        sleep_ms(250);
    }
    if (json_is_null(json_object_get(job, "placement")) &&
        jobs_terminal(json_string_value(json_object_get(job, "state"))) &&
        json_integer_value(json_object_get(job, "start_time")) == 0) {
        *final = job; /* ended without ever running: no output */
        return CLI_OK;
    }
    for (bool told = false;;) {
        char path[128], run[16], node[80], *buf = NULL;
        size_t len = 0;
        bool ended;

        allot_fmt(path, sizeof(path), "/v1/jobs/%lld/logs?task=%lld&offset=%lld", id, task, offset);
        rc = client_get_bytes(cl, path, &buf, &len);
        if (rc != CLI_OK) {
            allot_free(buf);
            json_decref(job);
            return rc;
        }
        /* not placed now: allotd read the log of the run before (once said) */
        if (!told && client_reply_header(cl, "X-Allot-Log-Run", run, sizeof(run)) &&
            !strcmp(run, "previous")) {
            const char *st = json_string_value(json_object_get(job, "state"));
            bool again = st && !strcmp(st, "pending");

            client_reply_header(cl, "X-Allot-Log-Node", node, sizeof(node));
            fprintf(stderr, "allot: job %lld is %s%s; this is the log of its %s run, on node %s\n",
                    id, st ? st : "not placed", again ? " again" : "", again ? "previous" : "last",
                    node);
            told = true;
        }
        if (len) /* an empty answer has no buffer */
            fwrite(buf, 1, len, stdout);
        fflush(stdout);
        allot_free(buf);
        offset += (long long)len;
        if (len)
            continue; /* more may be there right away */
        ended = jobs_terminal(json_string_value(json_object_get(job, "state")));
        if (!follow || ended)
            break;
        sleep_ms(300);
        json_decref(job);
        job = NULL;
        if ((rc = get_job(cl, id, &job)) != CLI_OK)
            return rc;
        /* an end seen now: read once more, then stop at the next empty read */
    }
    *final = job;
    return CLI_OK;
}

static const struct cli_opt logs_opts[] = {
    {"follow", 'f', NULL, "keep printing new output until the job has ended"},
    {"task", 0, "N", "task of the gang (default 0)"},
    {NULL, 0, NULL, NULL}};

static const struct cli_usage logs_usage = {
    "logs", "[-f] [--task N] JOB_ID|ARRAYID_INDEX",
    "Prints the standard output and error of one task of a job, read through\n"
    "allotd from the agent of its node. With --follow, waits for the job to\n"
    "start and prints its output as it comes until the job has ended."};

int cmd_logs(struct cli *c, int argc, char **argv)
{
    struct cli_args a;
    struct client *cl;
    json_t *final = NULL;
    long long id;
    int64_t task = 0;
    const char *s;
    int rc = args_parse(c, logs_opts, &logs_usage, argc, argv, &a);

    if (rc != CLI_OK)
        return rc;
    if (a.n_pos != 1) {
        rc = cli_usage_error("allot logs [-f] [--task N] JOB_ID");
        goto out;
    }
    if ((s = args_get(&a, "task")) && (rc = args_int("task", s, 0, 1023, &task)) != CLI_OK)
        goto out;
    if (!(cl = cli_client(c))) {
        rc = CLI_USAGE;
        goto out;
    }
    if ((rc = jobs_resolve(cl, a.pos[0], &id)) != CLI_OK)
        goto out;
    rc = stream(cl, id, task, args_has(&a, "follow"), &final);
out:
    json_decref(final);
    args_free(&a);
    return rc;
}

static const struct cli_usage run_usage = {
    "run", "[SUBMIT OPTIONS] -- COMMAND ARGS...",
    "Submits a job like `allot submit`, waits for it, prints the output of its\n"
    "first task as it comes, and exits with the job's exit code (1 when it\n"
    "ended without one: cancelled, lost, refused), as srun does."};

int cmd_run(struct cli *c, int argc, char **argv)
{
    struct cli_args a;
    json_t *reply = NULL, *final = NULL;
    int rc = args_parse(c, jobs_submit_opts, &run_usage, argc, argv, &a);

    if (rc != CLI_OK)
        return rc;
    if (a.n_pos || !a.rest) {
        rc = cli_usage_error("allot run [SUBMIT OPTIONS] -- COMMAND ARGS...");
        goto out;
    }
    if ((rc = jobs_submit(c, &a, &reply)) != CLI_OK)
        goto out;
    long long id = json_integer_value(json_object_get(reply, "id"));
    fprintf(stderr, "allot: job %lld submitted\n", id);
    if ((rc = stream(c->http, id, 0, true, &final)) != CLI_OK)
        goto out;
    const char *st = json_string_value(json_object_get(final, "state"));
    json_t *code = json_object_get(final, "exit_code");
    const char *why = json_string_value(json_object_get(final, "pending_reason"));
    if (st && strcmp(st, "succeeded") != 0)
        fprintf(stderr, "allot: job %lld %s%s%s\n", id, st, why ? ": " : "", why ? why : "");
    rc = json_is_integer(code)            ? (int)(json_integer_value(code) & 0xff)
         : st && !strcmp(st, "succeeded") ? 0
                                          : 1;
out:
    json_decref(reply);
    json_decref(final);
    args_free(&a);
    return rc;
}
