/*
 * `allot logs [-f] [--task N] JOB`: a task's output, read through allotd
 * (GET /v1/jobs/{id}/logs, which reads it from the node's agent), from the
 * start or, with --follow, until the job has ended. A job that is not
 * placed now but ran before (pending again, or cancelled while it waited)
 * shows its last run's log, with a line on stderr saying so. `allot run`:
 * submit, wait, stream task 0's output and exit with the job's exit code,
 * as `srun` does.
 *
 * When a follower stops: allotd marks a cancelled job ended at once, but
 * the node's agent stops its task with a grace (SIGTERM, then SIGKILL),
 * and what the task writes meanwhile lands in its log too. So a follower
 * stops at an empty read made after it saw the job ended, once the agent
 * said with it (X-Allot-Log-Complete: yes; no header: an agent that does
 * not say, the empty read is taken as the end) that nothing of the task
 * writes to the log any more. It waits for that at most STOP_WAIT_MS from
 * the end it saw, and says so when it gives up.
 *
 * Transient while following: allotd restarted knows where a node's agent
 * serves its logs only from the agent's next heartbeat, and answers 502
 * no_agent until then, and an agent restarting, or a node being lost, is
 * answered 502 agent_unreachable; a job starting again on another node has
 * no log there until its task starts (404 no_log). A follower asks again,
 * with back-off and silently, while the job goes on (a lost node's job
 * queues again and runs elsewhere), and for at most NO_AGENT_WAIT_MS once it
 * has ended (the 502s only), before it gives up with that error.
 *
 * A job that runs again on another node writes another file there (a task's
 * log on a node grows with every run of the job on that node). Offsets are
 * kept per node: a read answered from another node than the one before
 * (X-Allot-Log-Node) is read again from that node's own offset, 0 for a node
 * not read yet, and stderr says the job runs on.
 */
#include "cli.h"

#include "allot/common.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The longest an agent's --grace may be (allot-agent: 1 h), and a minute
 * for SIGKILL and the task's supervisor to note the end. */
#define STOP_WAIT_MS (3600000L + 60000L)
/* How long a follower asks again while allotd does not know where the
 * node's agent serves its logs (a heartbeat of the agent tells it). */
#define NO_AGENT_WAIT_MS 60000L
/* While a followed job waits, its reason is said again when it changed,
 * but not more often than this (reasons may count down each cycle). */
#define WHY_EVERY_MS 30000LL
/* The longest reason kept to compare (allotd's are shorter). */
#define RUN_REASON_MAX 512
/* Nodes whose offsets a follower keeps (a job that ran on more nodes than
 * that reads a node it forgot from its start again). */
#define FOLLOW_NODES 16

/* Where a follower is in each node's log of the task. */
struct node_offsets {
    char node[FOLLOW_NODES][80];
    long long offset[FOLLOW_NODES];
    size_t n, next; /* filled; the slot reused next once all are */
};

/* The offset kept for `node`'s log: 0 for one not read yet (or forgotten),
 * which then takes a slot. */
static long long *node_offset(struct node_offsets *o, const char *node)
{
    size_t i;

    for (i = 0; i < o->n; i++)
        if (!strcmp(o->node[i], node))
            return &o->offset[i];
    if (o->n < FOLLOW_NODES) {
        i = o->n++;
    } else {
        i = o->next;
        o->next = (o->next + 1) % FOLLOW_NODES;
    }
    allot_strlcpy(o->node[i], node, sizeof(o->node[i]));
    o->offset[i] = 0;
    return &o->offset[i];
}

/* Whether a failed log read is worth asking again while following: allotd
 * does not know the node's agent yet, or cannot reach it; or, while the
 * job goes on (`ended` false), the node it starts on again has no log of
 * it yet (its agent opens the log when the task starts, which may wait for
 * a stopping task's GPUs or an image). */
static bool transient_log_error(const struct client_error *err, bool ended)
{
    return (err->status == 502 &&
            (!strcmp(err->code, "no_agent") || !strcmp(err->code, "agent_unreachable"))) ||
           (!ended && err->status == 404 && !strcmp(err->code, "no_log"));
}

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

/* Whether the job ended without ever running (cancelled or refused while
 * it waited for its first start): it has no output anywhere. */
static bool ended_unrun(const json_t *job)
{
    return json_is_null(json_object_get(job, "placement")) &&
           jobs_terminal(json_string_value(json_object_get(job, "state"))) &&
           json_integer_value(json_object_get(job, "start_time")) == 0;
}

/* Prints the job's task output. With follow, waits for it to start and
 * prints what comes until it ended and its task's log is complete (see the
 * top of the file). *final gets the job as it ended (or as last read);
 * *cut is set when the follower gave up waiting for the log to be
 * complete (said on stderr). Returns an exit code. */
static int stream(struct client *cl, long long id, long long task, bool follow, json_t **final,
                  bool *cut)
{
    struct node_offsets offs = {0};
    char at[80] = ""; /* the node read last */
    long long offset = 0, ended_at = -1, no_agent_at = -1;
    long backoff = 250;
    json_t *job = NULL;
    int rc;

    *final = NULL;
    *cut = false;
    /* wait for a place to read from: the task has started or it ended;
     * meanwhile why it waits, on stderr (as srun's "queued and waiting"):
     * at once, then when it changes, at most every WHY_EVERY_MS */
    char said[RUN_REASON_MAX] = "";
    long long said_at = -1;
    for (;;) {
        const char *st, *why;

        json_decref(job);
        job = NULL;
        if ((rc = get_job(cl, id, &job)) != CLI_OK)
            return rc;
        st = json_string_value(json_object_get(job, "state"));
        if (!follow || (st && strcmp(st, "pending") != 0 && strcmp(st, "starting") != 0) ||
            jobs_terminal(st))
            break;
        why = json_string_value(json_object_get(job, "pending_reason"));
        if (st && !strcmp(st, "pending") && why && *why && strcmp(why, said) != 0 &&
            (said_at < 0 || allot_mono_ms() - said_at >= WHY_EVERY_MS)) {
            fprintf(stderr, "allot: job %lld waits: %s\n", id, why);
            allot_strlcpy(said, why, sizeof(said));
            said_at = allot_mono_ms();
        }
        sleep_ms(250);
    }
    if (ended_unrun(job)) {
        *final = job; /* no output */
        return CLI_OK;
    }
    for (bool told = false;;) {
        char path[128], run[16], node[80], done[8], *buf = NULL;
        struct client_error err;
        size_t len = 0;
        bool ended, complete;

        allot_fmt(path, sizeof(path), "/v1/jobs/%lld/logs?task=%lld&offset=%lld", id, task, offset);
        rc = client_try_get_bytes(cl, path, &buf, &len, &err);
        if (rc != CLI_OK) {
            allot_free(buf);
            /* the node's agent not known (yet) or out of reach: while the
             * job goes on, and for a while after it ended */
            bool ended_now = jobs_terminal(json_string_value(json_object_get(job, "state")));
            if (follow && transient_log_error(&err, ended_now) &&
                (!ended_now || no_agent_at < 0 ||
                 allot_mono_ms() - no_agent_at < NO_AGENT_WAIT_MS)) {
                if (ended_now && no_agent_at < 0)
                    no_agent_at = allot_mono_ms();
                sleep_ms(backoff);
                backoff = backoff < 1000 ? backoff * 2 : 2000; /* back soon once it is */
                json_decref(job);
                job = NULL;
                if ((rc = get_job(cl, id, &job)) != CLI_OK)
                    return rc;
                continue;
            }
            if (err.status) /* an error reply, held back: printed now */
                client_error_print(&err);
            if (no_agent_at >= 0 && transient_log_error(&err, ended_now))
                fprintf(stderr, "allot: gave up following job %lld after %ld s\n", id,
                        NO_AGENT_WAIT_MS / 1000);
            json_decref(job);
            return rc;
        }
        no_agent_at = -1;
        backoff = 250;
        /* the reply's headers, before another call replaces them */
        complete = !client_reply_header(cl, "X-Allot-Log-Complete", done, sizeof(done)) ||
                   strcmp(done, "no") != 0;
        if (!client_reply_header(cl, "X-Allot-Log-Node", node, sizeof(node)))
            *node = '\0';
        if (*at && strcmp(node, at) != 0) {
            /* another node's log, read from this one's offset: ask it again
             * from where the follower is in it */
            allot_free(buf);
            *node_offset(&offs, at) = offset;
            offset = *node_offset(&offs, node);
            allot_strlcpy(at, node, sizeof(at));
            fprintf(stderr, "allot: job %lld runs again, on node %s\n", id, node);
            continue;
        }
        allot_strlcpy(at, node, sizeof(at));
        /* not placed now: allotd read the log of the run before (once said) */
        if (!told && client_reply_header(cl, "X-Allot-Log-Run", run, sizeof(run)) &&
            !strcmp(run, "previous")) {
            const char *st = json_string_value(json_object_get(job, "state"));
            bool again = st && !strcmp(st, "pending");

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
        /* ended as read before this read, complete as of this read: all of it printed */
        ended = jobs_terminal(json_string_value(json_object_get(job, "state")));
        if (!follow || (ended && complete))
            break;
        if (ended && ended_at < 0) {
            ended_at = allot_mono_ms(); /* its task is still stopping */
        } else if (ended && allot_mono_ms() - ended_at > STOP_WAIT_MS) {
            fprintf(stderr,
                    "allot: job %lld ended, but its task on node %s has not stopped after %ld s; "
                    "what it writes from now on is not shown here (allot logs %lld shows it)\n",
                    id, node, STOP_WAIT_MS / 1000, id);
            *cut = true;
            break;
        }
        sleep_ms(300);
        json_decref(job);
        job = NULL;
        if ((rc = get_job(cl, id, &job)) != CLI_OK)
            return rc;
        /* an end seen now: read once more, then stop at the next empty read
         * that finds the log complete */
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
    "start and prints its output as it comes until the job has ended and all of\n"
    "its output was printed."};

int cmd_logs(struct cli *c, int argc, char **argv)
{
    struct cli_args a;
    struct client *cl;
    json_t *final = NULL;
    long long id;
    int64_t task = 0;
    const char *s;
    bool cut;
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
    if (args_has(&a, "follow"))
        client_wait_outages(cl, CLI_OUTAGE_WAIT_MS);
    rc = stream(cl, id, task, args_has(&a, "follow"), &final, &cut);
    if (rc == CLI_OK && cut)
        rc = CLI_SERVER; /* not everything was printed */
    if (rc == CLI_OK && ended_unrun(final)) {
        fprintf(stderr, "allot: job %lld was %s before it was ever placed; it has no output\n", id,
                json_string_value(json_object_get(final, "state")));
        rc = CLI_CONFLICT;
    }
out:
    json_decref(final);
    args_free(&a);
    return rc;
}

static const struct cli_usage run_usage = {
    "run",
    "[SUBMIT OPTIONS] -- COMMAND ARGS...\n       allot run [SUBMIT OPTIONS] SCRIPT [ARGS...]",
    "Submits a job like `allot submit`, waits for it, prints the output of its\n"
    "first task as it comes, and exits with the job's exit code (1 when it\n"
    "ended without one: cancelled, lost, refused), as srun does."};

/* What an interrupted `allot run` says: the job goes on (made before the
 * handler is set; a handler may only write and die). */
static char interrupted_msg[160];

static void on_interrupt(int sig)
{
    ssize_t w = write(STDERR_FILENO, interrupted_msg, strlen(interrupted_msg));

    (void)w;
    /* die of the signal, so that a shell running allot run in a loop
     * stops as it would for any command it interrupts */
    signal(sig, SIG_DFL);
    raise(sig);
}

int cmd_run(struct cli *c, int argc, char **argv)
{
    struct cli_args a;
    json_t *reply = NULL, *final = NULL;
    bool cut; /* said on stderr; the exit code stays the job's */
    int rc = args_parse_operand(c, jobs_submit_opts, &run_usage, argc, argv, &a);

    if (rc != CLI_OK)
        return rc;
    if (a.n_pos > 1 || (!a.n_pos && !a.rest)) {
        rc = cli_usage_error("allot run [SUBMIT OPTIONS] -- COMMAND ARGS..., or allot run "
                             "[SUBMIT OPTIONS] SCRIPT [ARGS...]");
        goto out;
    }
    /* one job's output and exit code: not an array's */
    if ((rc = jobs_submit(c, &a, &run_usage, true, &reply)) != CLI_OK)
        goto out;
    long long id = json_integer_value(json_object_get(reply, "id"));
    fprintf(stderr, "allot: job %lld submitted\n", id);
    /* Ctrl-C leaves the job running: say so, and how to stop it */
    allot_fmt(interrupted_msg, sizeof(interrupted_msg),
              "\nallot: interrupted; job %lld goes on: allot logs -f %lld follows it, allot "
              "cancel %lld stops it\n",
              id, id, id);
    struct sigaction sa = {.sa_handler = on_interrupt};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    client_wait_outages(c->http, CLI_OUTAGE_WAIT_MS);
    if ((rc = stream(c->http, id, 0, true, &final, &cut)) != CLI_OK)
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
