/*
 * Fuzz target: the bodies agents send allotd (agentproto.h): every input is
 * read as JSON and given to both the inventory check of POST
 * /v1/nodes/register and the heartbeat check of POST
 * /v1/nodes/{name}/heartbeat, as allotd does.
 *
 * Invariants: each check answers 0, 400 or 422 (422 only for an
 * inventory) with a message on refusal; an accepted inventory has a valid
 * name, positive CPUs and memory, at most ALLOT_MAX_GPUS GPUs of one catalog
 * model and a count equal to its gpus array; an accepted heartbeat has at
 * most 64 reports, each with an integer id and a state an agent may
 * report, a wait in 0..60000 ms, a version of at most 64 bytes, a logs URL
 * of http(s) and at most ALLOT_MAX_GPUS GPU health entries.
 */
#include "fuzz.h"

#include "agentproto.h"
#include "allot/common.h"

#include "allot/catalog.h"
#include "allot/cluster.h"
#include "allot/store.h"

#include <string.h>

static struct allot_catalog *cat; /* owned; loaded once, kept for the process */

static void check_inventory(json_t *b)
{
    char err[512] = "";
    int n = -1, rc = agentproto_inventory(b, cat, &n, err, sizeof(err));

    FUZZ_CHECK(rc == 0 || rc == 400 || rc == 422);
    if (rc) {
        FUZZ_CHECK(*err);
        return;
    }
    json_t *g = json_object_get(b, "gpus"), *x;
    size_t i;
    int model = -2;

    FUZZ_CHECK(allot_node_name_ok(json_string_value(json_object_get(b, "name"))));
    FUZZ_CHECK(json_number_value(json_object_get(b, "cpus")) > 0);
    FUZZ_CHECK(json_integer_value(json_object_get(b, "memory")) > 0);
    FUZZ_CHECK(n == (int)json_array_size(g) && n <= ALLOT_MAX_GPUS);
    json_array_foreach(g, i, x)
    {
        int m = allot_catalog_find_model(cat, json_string_value(json_object_get(x, "model")));
        FUZZ_CHECK(m >= 0 && (model == -2 || m == model));
        model = m;
    }
}

static void check_heartbeat(json_t *b)
{
    struct hb_body hb;
    char err[512] = "";
    int rc = agentproto_heartbeat(b, &hb, err, sizeof(err));
    json_t *x;
    size_t i;

    FUZZ_CHECK(rc == 0 || rc == 400);
    if (rc) {
        FUZZ_CHECK(*err);
        return;
    }
    FUZZ_CHECK(!hb.jobs || json_array_size(hb.jobs) <= AGENTPROTO_MAX_REPORTS);
    json_array_foreach(hb.jobs, i, x)
    {
        int st = allot_store_job_state_parse(json_string_value(json_object_get(x, "state")));
        FUZZ_CHECK(json_is_integer(json_object_get(x, "id")));
        FUZZ_CHECK(st == ALLOT_SJ_RUNNING || st == ALLOT_SJ_SUCCEEDED || st == ALLOT_SJ_FAILED ||
                   st == ALLOT_SJ_LOST);
    }
    FUZZ_CHECK(hb.wait_ms >= 0 && hb.wait_ms <= 60000);
    FUZZ_CHECK(!hb.known || strlen(hb.known) <= 64);
    if (hb.logs) {
        const char *u = json_string_value(json_object_get(hb.logs, "url"));
        FUZZ_CHECK(u && (!strncmp(u, "http://", 7) || !strncmp(u, "https://", 8)));
    }
    FUZZ_CHECK(!hb.health || json_array_size(json_object_get(hb.health, "gpus")) <= ALLOT_MAX_GPUS);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[256];
    json_t *b;

    if (!cat && !(cat = allot_catalog_default(err, sizeof(err))))
        abort();
    b = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, NULL);
    if (!b)
        return 0;
    check_inventory(b);
    check_heartbeat(b);
    json_decref(b);
    return 0;
}
