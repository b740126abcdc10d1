"""Tenants and jobs through the allotd API: the tenant tree round trip
(PUT/GET, 422 for impossible trees, 409 when removing a tenant with live
jobs), job submission with strict validation (400 for types and unknown
fields, 422 for impossible requests), Idempotency-Key, listing with
filters and keyset paging, get, cancel and events."""

import copy
import time

import allotd_fixture as fx
from allotd_fixture import TENANTS, Daemon, expect

dm = None


def test_tenants_round_trip():
    expect(dm.req("PUT", "/v1/tenants", TENANTS, token=dm.admin), 200)
    got = expect(dm.req("GET", "/v1/tenants", token=dm.admin), 200)
    assert [t["path"] for t in got["tenants"]] == sorted(t["path"] for t in TENANTS["tenants"])
    assert [c["name"] for c in got["priority_classes"]] == ["inference", "training"]
    vis = [t for t in got["tenants"] if t["path"] == "research/vision"][0]
    assert vis["quotas"] == {"gpu": 8, "cpu": 1024, "memory": "8Ti"}, vis
    srch = [t for t in got["tenants"] if t["path"] == "product/search"][0]
    assert srch["isolation"] == "exclusive-gpu"
    # the document read back applies unchanged
    expect(dm.req("PUT", "/v1/tenants", got, token=dm.admin), 200)
    assert expect(dm.req("GET", "/v1/tenants", token=dm.admin), 200) == got


def test_tenants_422():
    bad = copy.deepcopy(TENANTS)
    bad["tenants"][1]["quotas"]["gpu"]["nominal"] = 100  # children over research's 16
    expect(dm.req("PUT", "/v1/tenants", bad, token=dm.admin), 422)
    bad = copy.deepcopy(TENANTS)
    bad["tenants"][0]["isolation"] = "paranoid"
    expect(dm.req("PUT", "/v1/tenants", bad, token=dm.admin), 422)
    bad = copy.deepcopy(TENANTS)
    bad["tenants"][0]["quotas"]["gpu:Z9000"] = 4
    expect(dm.req("PUT", "/v1/tenants", bad, token=dm.admin), 422)
    bad = copy.deepcopy(TENANTS)
    bad["tenants"].append({"path": "a//b"})
    expect(dm.req("PUT", "/v1/tenants", bad, token=dm.admin), 422)
    expect(dm.req("PUT", "/v1/tenants", {"tenants": "all"}, token=dm.admin), 400)
    # nothing changed
    got = expect(dm.req("GET", "/v1/tenants", token=dm.admin), 200)
    assert len(got["tenants"]) == 4


JOB = {"name": "train-1", "tenant": "research/nlp", "tasks": 2, "gpus": 1, "cpus": 4,
       "memory": 16384, "priority": "training", "command": ["python3", "train.py"],
       "env": {"EPOCHS": "3"}, "workdir": "/work", "time_limit": 3600,
       "checkpointable": True, "labels": {"team": "nlp"}, "gpu_models": ["A100-80GB"]}


def test_submit_get_and_idempotency():
    j = expect(dm.req("POST", "/v1/jobs", JOB, token=dm.admin,
                      headers={"Idempotency-Key": "k-1"}), 201)
    assert j["state"] == "pending" and j["tenant"] == "research/nlp" and j["spec"] == JOB, j
    again = expect(dm.req("POST", "/v1/jobs", JOB, token=dm.admin,
                          headers={"Idempotency-Key": "k-1"}), 200)
    assert again["id"] == j["id"]
    # the same request with its keys in another order is the same request
    swapped = dict(reversed(list(JOB.items())))
    assert list(swapped) != list(JOB)
    assert expect(dm.req("POST", "/v1/jobs", swapped, token=dm.admin,
                         headers={"Idempotency-Key": "k-1"}), 200)["id"] == j["id"]
    # the key reused for another request is refused, and nothing is stored
    n = len(expect(dm.req("GET", "/v1/jobs?limit=1000", token=dm.admin), 200)["jobs"])
    st, b = dm.req("POST", "/v1/jobs", dict(JOB, name="other"), token=dm.admin,
                   headers={"Idempotency-Key": "k-1"})
    assert st == 422 and b["error"]["code"] == "idempotency_key_reused", (st, b)
    assert "job %d" % j["id"] in b["error"]["message"], b
    assert len(expect(dm.req("GET", "/v1/jobs?limit=1000", token=dm.admin), 200)["jobs"]) == n
    other = expect(dm.req("POST", "/v1/jobs", JOB, token=dm.admin,
                          headers={"Idempotency-Key": "k-2"}), 201)
    assert other["id"] != j["id"]
    got = expect(dm.req("GET", "/v1/jobs/%d" % j["id"], token=dm.admin), 200)
    assert got["id"] == j["id"] and "pending_reason" in got and "placement" in got
    expect(dm.req("GET", "/v1/jobs/999999", token=dm.admin), 404)
    expect(dm.req("GET", "/v1/jobs/-1", token=dm.admin), 404)
    ev = expect(dm.req("GET", "/v1/jobs/%d/events" % j["id"], token=dm.admin), 200)["events"]
    assert ev[0]["kind"] == "submitted", ev
    # fractions and MIG are valid shapes
    expect(dm.req("POST", "/v1/jobs", {"tenant": "research/nlp", "gpu_milli": 250,
                                       "gpu_memory": 10240}, token=dm.admin), 201)
    expect(dm.req("POST", "/v1/jobs", {"tenant": "research/nlp", "mig": "1g.10gb"},
                  token=dm.admin), 201)
    # a decimal reads back as written, not as 0.10000000000000001
    c = expect(dm.req("POST", "/v1/jobs", {"tenant": "research/nlp", "cpus": 0.1},
                      token=dm.admin), 201)
    raw = dm.req("GET", "/v1/jobs/%d" % c["id"], token=dm.admin, raw=True)[1]
    assert '"cpus":0.1,' in raw or '"cpus":0.1}' in raw, raw


def test_submit_422_and_400():
    cases422 = [
        {"tenant": "research/nlp", "mig": "9g.900gb"},
        {"tenant": "research/nlp", "gpus": 17},
        {"tenant": "research/nlp", "gpus": 2, "mig": "1g.10gb"},
        {"tenant": "research/nlp", "gpu_milli": 1000},
        {"tenant": "nobody/here"},
        {"tenant": "research"},
        {"tenant": "research/nlp", "priority": "urgent"},
        {"tenant": "research/nlp", "gpu_models": ["Z9000"]},
        {"tenant": "research/nlp", "tasks": 0},
        {"tenant": "research/nlp", "cpus": -1},
        {"tenant": ""},
    ]
    for c in cases422:
        expect(dm.req("POST", "/v1/jobs", c, token=dm.admin), 422, repr(c))
    cases400 = [
        ({"tenant": "research/nlp", "gpus": 1.5}, "gpus"),
        ({"tenant": "research/nlp", "command": "ls"}, "command"),
        ({"tenant": "research/nlp", "env": {"A": 1}}, "env.A"),
        # a name with "=" would smuggle LD_PRELOAD in (a bind from the host)
        ({"tenant": "research/nlp", "env": {"LD_PRELOAD=/var/tmp/p": "/x"}}, "env"),
        ({"tenant": "research/nlp", "env": {"": "x"}}, "env"),
        ({"tenant": "research/nlp", "env": {"A B": "x"}}, "env"),
        ({"tenant": "research/nlp", "env": {"A\u00e9": "x"}}, "env"),
        ({"tenant": "research/nlp", "env": {"A" * 257: "x"}}, "env"),
        ({"tenant": "research/nlp", "checkpointable": "yes"}, "checkpointable"),
        ({"tenant": "research/nlp", "colour": "blue"}, "colour"),
        ({"name": "no tenant"}, "tenant"),
        ({"tenant": ["research/nlp"]}, "tenant"),
    ]
    for c, field in cases400:
        b = expect(dm.req("POST", "/v1/jobs", c, token=dm.admin), 400, repr(c))
        assert '"%s"' % field in b["error"]["message"], (c, b)
    expect(dm.req("POST", "/v1/jobs", {"tenant": "research/nlp"}, token=dm.admin,
                  headers={"Idempotency-Key": "k" * 200}), 400)
    b = expect(dm.req("POST", "/v1/jobs", {"tenant": "research/nlp",
                                           "env": {"LD_PRELOAD=/p": "/x"}}, token=dm.admin), 400)
    assert "is not a variable name" in b["error"]["message"], b
    expect(dm.req("POST", "/v1/jobs", {"tenant": "research/nlp", "env": {"a.b-c": "1"}},
                  token=dm.admin), 201)
    # a job of more GPUs than the largest registered node is impossible
    agent = dm.token("agent", "", "a")
    expect(dm.req("POST", "/v1/nodes/register", {"name": "small", "cpus": 16, "memory": 65536,
                                                 "gpus": [{"model": "A100-80GB"}] * 4},
                  token=agent), 201)
    b = expect(dm.req("POST", "/v1/jobs", {"tenant": "research/nlp", "gpus": 8},
                      token=dm.admin), 422)
    assert "4 GPUs" in b["error"]["message"], b
    # ... and so are more whole GPUs in all than the cluster has, and a fraction
    # of more memory than its largest GPU (once the scheduler holds the node)
    huge = [{"tenant": "research/nlp", "gpus": 4, "tasks": 1024},
            {"tenant": "research/nlp", "gpu_milli": 500, "gpu_memory": 100 * 1024}]
    end = time.time() + 10
    while time.time() < end and "\nallot_gpus 4\n" not in dm.req("GET", "/metrics")[1]:
        time.sleep(0.05)  # bounded: until the loop has added the node (not only the store)
    b = expect(dm.req("POST", "/v1/jobs", huge[0], token=dm.admin), 422)
    assert "asks for 4096 GPUs (1024 tasks of 4)" in b["error"]["message"], b
    b = expect(dm.req("POST", "/v1/jobs", huge[1], token=dm.admin), 422)
    assert "\"gpu_memory\" is 102400 MiB; the largest GPU" in b["error"]["message"], b
    assert "81920 MiB" in b["error"]["message"], b
    expect(dm.req("POST", "/v1/jobs", dict(huge[1], gpu_memory=40 * 1024), token=dm.admin),
           201)


def test_list_filters_and_paging():
    ids = []
    for i in range(25):
        j = expect(dm.req("POST", "/v1/jobs", {"tenant": "research/vision", "name": "p%d" % i,
                                               "cpus": 1}, token=dm.admin), 201)
        ids.append(j["id"])
    seen, cursor = [], 0
    for _ in range(10):
        b = expect(dm.req("GET", "/v1/jobs?tenant=research/vision&limit=10&cursor=%d" % cursor,
                          token=dm.admin), 200)
        assert len(b["jobs"]) <= 10
        seen += [x["id"] for x in b["jobs"]]
        cursor = b["next_cursor"]
        if not cursor:
            break
    assert seen == ids, (seen, ids)
    # newest first: the same jobs the other way round, page after page
    seen, cursor = [], 0
    for _ in range(10):
        b = expect(dm.req("GET", "/v1/jobs?tenant=research/vision&order=newest&limit=10%s" % (
            "&cursor=%d" % cursor if cursor else ""), token=dm.admin), 200)
        seen += [x["id"] for x in b["jobs"]]
        cursor = b["next_cursor"]
        if not cursor:
            break
    assert seen == ids[::-1], (seen, ids)
    old = expect(dm.req("GET", "/v1/jobs?tenant=research/vision&order=oldest&limit=1000",
                        token=dm.admin), 200)["jobs"]
    assert [x["id"] for x in old][-25:] == ids
    e = expect(dm.req("GET", "/v1/jobs?order=latest", token=dm.admin), 400)
    assert e["error"]["message"] == "order must be oldest or newest", e
    b = expect(dm.req("GET", "/v1/jobs?tenant=research&subtree=1&limit=1000", token=dm.admin), 200)
    assert {x["tenant"] for x in b["jobs"]} == {"research/nlp", "research/vision"}
    expect(dm.req("POST", "/v1/jobs/%d/cancel" % ids[0], token=dm.admin), 200)
    b = expect(dm.req("GET", "/v1/jobs?state=cancelled", token=dm.admin), 200)
    assert [x["id"] for x in b["jobs"]] == [ids[0]]
    expect(dm.req("GET", "/v1/jobs?limit=0", token=dm.admin), 400)
    expect(dm.req("GET", "/v1/jobs?cursor=-4", token=dm.admin), 400)


def test_cancel():
    j = expect(dm.req("POST", "/v1/jobs", {"tenant": "research/nlp", "cpus": 1},
                      token=dm.admin), 201)
    c = expect(dm.req("POST", "/v1/jobs/%d/cancel" % j["id"], token=dm.admin), 200)
    assert c["state"] == "cancelled" and c["end_time"] > 0
    expect(dm.req("POST", "/v1/jobs/%d/cancel" % j["id"], token=dm.admin), 409)
    expect(dm.req("POST", "/v1/jobs/424242/cancel", token=dm.admin), 404)
    ev = expect(dm.req("GET", "/v1/jobs/%d/events" % j["id"], token=dm.admin), 200)["events"]
    assert [e["kind"] for e in ev][-1] == "cancelled", ev
    assert expect(dm.req("GET", "/v1/jobs/%d" % j["id"], token=dm.admin), 200)["state"] == \
        "cancelled"
    # who cancelled it: the user (TENANT:NAME of a token bound to a tenant, as
    # the job's "user"), as requeue, hold, release, signal and time limits say
    bob = dm.token("member", "research/nlp", "bob")
    j = expect(dm.req("POST", "/v1/jobs", {"tenant": "research/nlp", "cpus": 1},
                      token=dm.admin), 201)
    expect(dm.req("POST", "/v1/jobs/%d/cancel" % j["id"], token=bob), 200)
    ev = expect(dm.req("GET", "/v1/jobs/%d/events" % j["id"], token=dm.admin), 200)["events"]
    assert ev[-1]["kind"] == "cancelled" and ev[-1]["detail"] == "cancelled by research/nlp:bob", ev
    # ... and its reason, which allot ls and show give for an ended job
    got = expect(dm.req("GET", "/v1/jobs/%d" % j["id"], token=dm.admin), 200)
    assert got["pending_reason"] == "cancelled by research/nlp:bob", got


def test_removing_a_busy_tenant_is_409():
    smaller = copy.deepcopy(TENANTS)
    smaller["tenants"] = [t for t in smaller["tenants"] if t["path"] != "research/nlp"]
    expect(dm.req("PUT", "/v1/tenants", smaller, token=dm.admin), 409)
    # a tenant without live jobs goes
    expect(dm.req("PUT", "/v1/tenants", dict(TENANTS, tenants=TENANTS["tenants"] +
                                             [{"path": "tmp/x"}]), token=dm.admin), 200)
    expect(dm.req("PUT", "/v1/tenants", TENANTS, token=dm.admin), 200)
    paths = [t["path"] for t in expect(dm.req("GET", "/v1/tenants", token=dm.admin), 200)[
        "tenants"]]
    assert "tmp/x" not in paths, paths
    # removing a parent whose children have live jobs names a busy child
    parentless = copy.deepcopy(TENANTS)
    parentless["tenants"] = [t for t in parentless["tenants"]
                             if not t["path"].startswith("research")]
    st, body = dm.req("PUT", "/v1/tenants", parentless, token=dm.admin)
    assert st == 409 and "tenant research/" in body["error"]["message"], (st, body)
    # listing a child keeps its ancestors (they are not removed, nothing is busy)
    only = {"version": 1, "priority_classes": TENANTS["priority_classes"],
            "tenants": [t for t in TENANTS["tenants"] if t["path"] != "research"]}
    expect(dm.req("PUT", "/v1/tenants", only, token=dm.admin), 200)
    paths = [t["path"] for t in expect(dm.req("GET", "/v1/tenants", token=dm.admin), 200)[
        "tenants"]]
    assert "research" in paths and "research/nlp" in paths, paths
    expect(dm.req("PUT", "/v1/tenants", TENANTS, token=dm.admin), 200)


def test_concurrent_submissions():
    import threading
    ids, errors = [], []
    lock = threading.Lock()

    def client(c):
        for i in range(15):
            st, b = dm.req("POST", "/v1/jobs", {"tenant": "research/vision", "cpus": 1,
                                                "name": "c%d-%d" % (c, i)}, token=dm.admin,
                           headers={"Idempotency-Key": "conc-%d-%d" % (c, i)})
            with lock:
                (ids if st == 201 else errors).append(b["id"] if st == 201 else (st, b))

    threads = [threading.Thread(target=client, args=(c,)) for c in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert not errors, errors[:3]
    assert len(ids) == 120 and len(set(ids)) == 120
    v = expect(dm.req("GET", "/v1/audit/verify", token=dm.admin), 200)
    assert v["ok"] is True, v


if __name__ == "__main__":
    dm = Daemon()
    try:
        fx.run([test_tenants_round_trip, test_tenants_422, test_submit_get_and_idempotency,
                test_submit_422_and_400, test_list_filters_and_paging, test_cancel,
                test_removing_a_busy_tenant_is_409, test_concurrent_submissions])
    finally:
        dm.stop()
