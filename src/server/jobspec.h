/*
 * Job requests of the allotd API: strict validation of a submitted body
 * and its translation into liballot-core's job spec. The same function
 * checks a POST /v1/jobs body (HTTP worker) and turns a stored spec back
 * into a core job (scheduling loop), so both agree on every field.
 */
#ifndef ALLOT_SERVER_JOBSPEC_H
#define ALLOT_SERVER_JOBSPEC_H

#include "allot/catalog.h"
#include "allot/cluster.h"

#include <jansson.h>

struct jobspec {
    const char *name;     /* borrowed from the JSON */
    const char *tenant;   /* borrowed */
    const char *priority; /* borrowed; NULL = default class */
    int n_tasks;
    struct allot_task task;
    int64_t limit_s;
    bool checkpointable;
    bool requeue; /* goes back to pending when its node is lost (default) */
};

/* Checks body `b` (borrowed) and fills *out. Returns 0, or 400 (unknown
 * field, wrong type: message names the field) or 422 (valid JSON that
 * asks for something impossible) with a message in err. */
int jobspec_parse(json_t *b, const struct allot_catalog *cat, struct jobspec *out, char *err,
                  size_t errlen);

#endif
