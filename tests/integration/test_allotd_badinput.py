"""A corpus of bad input against allotd: malformed and truncated JSON,
invalid UTF-8, huge numbers, SQL-looking strings, path tricks in names and
routes, NUL bytes, deep nesting. Each gets its documented error, and no
job, tenant, token or node changes (refusals are only audited)."""

import os
import sqlite3
import time
import allotd_fixture as fx
from allotd_fixture import TENANTS, Daemon, expect

dm = None


def snapshot():
    a = dm.admin
    return (expect(dm.req("GET", "/v1/jobs?limit=1000", token=a), 200)["jobs"],
            expect(dm.req("GET", "/v1/tenants", token=a), 200),
            expect(dm.req("GET", "/v1/tokens", token=a), 200),
            expect(dm.req("GET", "/v1/nodes", token=a), 200))


CORPUS = [
    # (method, path, body, status)
    ("POST", "/v1/jobs", b'{"tenant":"research/nlp",', 400),
    ("POST", "/v1/jobs", b'{"tenant":"research/nlp"}}', 400),
    ("POST", "/v1/jobs", b'\xef\xbb\xbf{"tenant":"research/nlp","cpus":1,"x":', 400),
    ("POST", "/v1/jobs", b'{"tenant":"research/nlp","name":"\xc3\x28"}', 400),
    ("POST", "/v1/jobs", b'{"tenant":"research/nlp","name":"a\\u0000b"}', 400),
    ("POST", "/v1/jobs", b'{"tenant":"research/nlp","gpus":99999999999999999999999}', 400),
    ("POST", "/v1/jobs", b'{"tenant":"research/nlp","gpus":1e300}', 400),
    ("POST", "/v1/jobs", b'{"tenant":"research/nlp","cpus":1e300}', 422),
    # no CPU at all would be no CPU limited and none billed
    ("POST", "/v1/jobs", b'{"tenant":"research/nlp","cpus":0}', 422),
    ("POST", "/v1/jobs", b'{"tenant":"research/nlp","cpus":0.0004}', 422),
    ("POST", "/v1/jobs", b'{"tenant":"research/nlp","memory":-1}', 422),
    ("POST", "/v1/jobs", b'{"tenant":"research/nlp","tasks":9223372036854775807}', 422),
    ("POST", "/v1/jobs", b'[' * 5000 + b']' * 5000, 400),
    ("POST", "/v1/jobs", b'{"tenant":"x\'); DROP TABLE jobs;--","command":["true"]}', 422),
    ("POST", "/v1/jobs", b'{"tenant":"../../etc/passwd","command":["true"]}', 422),
    ("POST", "/v1/jobs", b'{"tenant":"research/nlp/../vision","command":["true"]}', 422),
    ("POST", "/v1/jobs", b'{"tenant":"research/nlp","name":"' + b"n" * 200 + b'"}', 422),
    # what no node could run: a registry reference for an image, a GPU model for no GPU
    ("POST", "/v1/jobs", b'{"tenant":"research/nlp","image":"docker.io/library/ubuntu:22.04"}',
     422),
    ("POST", "/v1/jobs", b'{"tenant":"research/nlp","image":"../etc"}', 422),
    ("POST", "/v1/jobs", b'{"tenant":"research/nlp","gpu_models":["A100-80GB"],'
     b'"command":["true"]}', 422),
    # no program to run
    ("POST", "/v1/jobs", b'{"tenant":"research/nlp"}', 422),
    ("POST", "/v1/jobs", b'{"tenant":"research/nlp","command":[]}', 422),
    ("POST", "/v1/jobs", b'{"tenant":"research/nlp","command":"true"}', 400),
    # a begin time: Unix seconds up to the end of year 9999
    ("POST", "/v1/jobs", b'{"tenant":"research/nlp","begin_time":"now+1h"}', 400),
    ("POST", "/v1/jobs", b'{"tenant":"research/nlp","begin_time":1.5e9}', 400),
    ("POST", "/v1/jobs", b'{"tenant":"research/nlp","begin_time":-1}', 422),
    ("POST", "/v1/jobs", b'{"tenant":"research/nlp","begin_time":253402300800}', 422),
    # node selectors: an object of at most 4 labels, each by the label rule
    ("POST", "/v1/jobs", b'{"tenant":"research/nlp","node_selector":["zone=a"]}', 400),
    ("POST", "/v1/jobs", b'{"tenant":"research/nlp","node_selector":{"zone":1}}', 400),
    ("POST", "/v1/jobs", b'{"tenant":"research/nlp","node_selector":{"a b":"x"}}', 400),
    ("POST", "/v1/jobs", b'{"tenant":"research/nlp","node_selector":{"a=b":"x"}}', 400),
    ("POST", "/v1/jobs", b'{"tenant":"research/nlp","node_selector":{"":"x"}}', 400),
    ("POST", "/v1/jobs", b'{"tenant":"research/nlp","node_selector":{"a":"x\\u0000y"}}', 400),
    ("POST", "/v1/jobs", b'{"tenant":"research/nlp","node_selector":{"a":"x\\ty"}}', 400),
    ("POST", "/v1/jobs", b'{"tenant":"research/nlp","node_selector":{"' + b"k" * 64 +
     b'":"x"}}', 400),
    ("POST", "/v1/jobs", b'{"tenant":"research/nlp","node_selector":{"a":"1","b":"2","c":"3",'
     b'"d":"4","e":"5"}}', 400),
    ("POST", "/v1/nodes/register", b'{"name":"lab-1","cpus":1,"memory":1,"labels":{"a b":""}}',
     400),
    ("POST", "/v1/nodes/register", b'{"name":"lab-1","cpus":1,"memory":1,"labels":{"a":"\\n"}}',
     400),
    ("POST", "/v1/nodes/register", b'{"name":"lab-1","cpus":1,"memory":1,"labels":{' +
     b','.join(b'"k%d":""' % i for i in range(33)) + b'}}', 400),
    # routes that take no body refuse one (an empty object aside), before anything else
    ("POST", "/v1/jobs/1/cancel", b'{"reason":', 400),
    ("POST", "/v1/jobs/1/cancel", b'{"force":true}', 400),
    ("POST", "/v1/jobs/1/hold", b'[1]', 400),
    ("POST", "/v1/jobs/1/release", b'nonsense', 400),
    ("POST", "/v1/jobs/1/requeue", b'{"node":"n1"}', 400),
    ("POST", "/v1/nodes/n1/cordon", b'{"reason":"disk"}', 400),
    ("POST", "/v1/nodes/n1/drain", b'{', 400),
    ("POST", "/v1/nodes/n1/uncordon", b'"x"', 400),
    ("PUT", "/v1/tenants", b'{"tenants":[{"path":"a; DELETE FROM tenants"}]}', 422),
    ("PUT", "/v1/tenants", b'{"tenants":[{"path":"../x"}]}', 422),
    ("PUT", "/v1/tenants", b'{"tenants":[{"path":"a","weight":-1}]}', 422),
    ("PUT", "/v1/tenants", b'{"tenants":[{"path":"a","quotas":{"gpu":"lots"}}]}', 422),
    ("PUT", "/v1/tenants", b'{"tenants":[{"path":"a","quotas":{"gpu":1e400}}]}', 400),
    ("POST", "/v1/nodes/register", b'{"name":"../../x","cpus":1,"memory":1}', 422),
    ("POST", "/v1/nodes/register", b'{"name":"n\' OR 1=1","cpus":1,"memory":1}', 422),
    ("POST", "/v1/nodes/register", b'{"name":"n","cpus":1,"memory":1,"gpus":' +
     b'[' + b','.join([b'{"model":"T4"}'] * 17) + b']}', 422),
    ("POST", "/v1/tokens", b'{"role":"admin","tenant":"x\'--"}', 422),
    ("POST", "/v1/tokens", b'{"role":"member","tenant":"research/../researchx"}', 422),
    ("POST", "/v1/tokens", b'{"role":"member","tenant":"research/vision/"}', 422),
    ("GET", "/v1/jobs/1%20OR%201=1", None, 404),
    ("GET", "/v1/jobs/%2e%2e", None, 404),
    ("GET", "/v1/jobs/99999999999999999999999", None, 404),
    ("DELETE", "/v1/tokens/0", None, 404),
    ("GET", "/v1/jobs?tenant=%27%20OR%201%3D1--", None, 200),
    # flags are "true", "1", "false" or "0", never silently false
    ("GET", "/v1/jobs?subtree=yes", None, 400),
    ("POST", "/v1/jobs/1/cancel?array=2", None, 400),
    ("POST", "/v1/nodes/n1/drain?evict=on", None, 400),
    ("POST", "/v1/nodes/register?credential=please",
     b'{"name":"flag-1","cpus":1,"memory":1}', 400),
]


def test_corpus():
    before = snapshot()
    for method, path, body, want in CORPUS:
        st, b = dm.req(method, path, body, token=dm.admin)
        assert st == want, "%s %s %r: want %d got %d %r" % (method, path, body[:80] if body
                                                              else body, want, st, b)
        if st >= 400:
            assert set(b["error"]) == {"code", "message"}, b
    assert snapshot() == before, "a refused request changed stored state"


def test_tenant_errors_name_the_entry():
    """A tenants document's error names the entry (index and path), not a line of the
    text allotd made of the JSON."""
    doc = {"version": 1,
           "tenants": [{"path": "a", "quotas": {"gpu": 4}}, {"path": "a/x"},
                       {"path": "a/y", "quotas": {"gpu:NoSuchGPU": 1}}]}
    st, b = dm.req("PUT", "/v1/tenants", doc, token=dm.admin)
    assert st == 422 and b["error"]["message"].startswith("tenants[2] (a/y): "), (st, b)
    doc = {"version": 1,
           "tenants": [{"path": "b", "quotas": {"gpu": 4}}, {"path": "b/x", "quotas": {"gpu": 3}},
                       {"path": "b/y", "quotas": {"gpu": 3}}]}
    st, b = dm.req("PUT", "/v1/tenants", doc, token=dm.admin)
    assert st == 422 and b["error"]["message"].startswith("tenants[0] (b): "), (st, b)
    assert 'below "b" add up to 6' in b["error"]["message"], b
    # twice: both entries named, never a line of that text
    doc = {"version": 1, "tenants": [{"path": "c"}, {"path": "d"}, {"path": "c"}]}
    st, b = dm.req("PUT", "/v1/tenants", doc, token=dm.admin)
    assert st == 422 and b["error"]["message"] == (
        'tenants[2] (c): tenant "c" listed twice (first as tenants[0] (c))'), (st, b)
    doc = {"version": 1, "tenants": [{"path": "c"}],
           "priority_classes": [{"name": "p", "value": 1}, {"name": "q", "value": 2},
                                {"name": "p", "value": 3}]}
    st, b = dm.req("PUT", "/v1/tenants", doc, token=dm.admin)
    assert st == 422 and b["error"]["message"] == (
        'priority_classes[2] (p): priority class "p" defined twice '
        '(first as priority_classes[0] (p))'), (st, b)
    # a number is read back as it was written
    doc = {"version": 1, "tenants": [{"path": "c", "weight": 1.2345}]}
    st, b = dm.req("PUT", "/v1/tenants", doc, token=dm.admin)
    assert st == 422 and 'weight "1.2345": want a number > 0 (up to 3 decimals)' in \
        b["error"]["message"], (st, b)


def test_env_cannot_set_the_gpu_share():
    """A job may not set the variables its node enforces a GPU share through (a memory
    cap of its own, a soft compute share, another LD_PRELOAD): 400 naming the variable.
    Other variables, ALLOT_TOKEN among them, pass."""
    before = snapshot()
    for name in ("ALLOT_GPU_MEMORY_LIMIT_0", "ALLOT_GPU_SM_SOFT", "ALLOT_SHIM_NVML_CHECK",
                 "ALLOT_CUDA_LIB", "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", "LD_PRELOAD"):
        st, b = dm.req("POST", "/v1/jobs", {"tenant": "research/nlp", "gpus": 0,
                                            "command": ["true"], "env": {name: "1Ti"}},
                       token=dm.admin)
        assert st == 400 and ("env.%s" % name) in b["error"]["message"], (name, st, b)
    # what the node sets for every task (it would be overridden unseen)
    for name in ("PATH", "HOME", "USER", "CUDA_VISIBLE_DEVICES", "ALLOT_JOB_ID",
                 "ALLOT_TASK_NODES", "ALLOT_RDMA_VFS"):
        st, b = dm.req("POST", "/v1/jobs", {"tenant": "research/nlp", "gpus": 0,
                                            "command": ["true"], "env": {name: "x"}},
                       token=dm.admin)
        assert st == 422 and ("env.%s" % name) in b["error"]["message"] and \
            "the node sets it" in b["error"]["message"], (name, st, b)
    assert snapshot() == before
    j = expect(dm.req("POST", "/v1/jobs", {"tenant": "research/nlp", "gpus": 0,
                                           "command": ["true"],
                                           "env": {"ALLOT_TOKEN": "t", "ALLOT_GPUX": "1"}},
                      token=dm.admin), 201)
    expect(dm.req("POST", "/v1/jobs/%d/cancel" % j["id"], token=dm.admin), 200)

def test_sql_looking_strings_are_stored_verbatim():
    name = "x'); DROP TABLE jobs;-- \u00e9\u4e2d"
    j = expect(dm.req("POST", "/v1/jobs", {"tenant": "research/nlp", "name": name, "cpus": 1,
                                           "env": {"Q": "' OR 1=1 --"}}, token=dm.admin), 201)
    got = expect(dm.req("GET", "/v1/jobs/%d" % j["id"], token=dm.admin), 200)
    assert got["name"] == name and got["spec"]["env"]["Q"] == "' OR 1=1 --", got
    st, b = dm.req("POST", "/v1/tokens", {"role": "viewer", "tenant": "research",
                                          "name": "'; --"}, token=dm.admin)
    assert st == 201 and b["tenant"] == "research" and b["name"] == "'; --", b


def test_default_memory():
    """With --default-mem-per-cpu and --default-mem-per-gpu a job that names no memory gets
    it in its spec (reserved, capped, billed as asked); one that names some keeps it;
    without them it stays without."""
    d = Daemon(args=["--default-mem-per-cpu", "2G", "--default-mem-per-gpu", "16G"])
    try:
        expect(d.req("PUT", "/v1/tenants", TENANTS, token=d.admin), 200)
        for body, mem in (({"cpus": 2}, 4096), ({"cpus": 0.5}, 1024), ({}, 2048),
                          ({"gpus": 2, "cpus": 4}, 32768), ({"cpus": 2, "memory": 100}, 100),
                          ({"gpu_milli": 500}, 2048),
                          # 0 is no amount, not a way round the default's cap
                          ({"cpus": 2, "memory": 0}, 4096)):
            jid = expect(d.req("POST", "/v1/jobs", dict(body, tenant="research/nlp"),
                               token=d.admin), 201)["id"]
            spec = expect(d.req("GET", "/v1/jobs/%d" % jid, token=d.admin), 200)["spec"]
            assert spec.get("memory") == mem, (body, spec)
        # a retry after the default changed (a restart between) is the same request
        h = {"Idempotency-Key": "mem-retry"}
        body = {"tenant": "research/nlp", "cpus": 2}
        first = expect(d.req("POST", "/v1/jobs", body, token=d.admin, headers=h), 201)["id"]
        admin = d.admin
        assert d.stop() == 0
        d = Daemon(d.dir, args=["--default-mem-per-cpu", "3G"])
        d.admin = admin
        assert expect(d.req("POST", "/v1/jobs", body, token=d.admin, headers=h),
                      200)["id"] == first
        st, b = d.req("POST", "/v1/jobs", dict(body, cpus=3), token=d.admin, headers=h)
        assert st == 422 and b["error"]["code"] == "idempotency_key_reused", (st, b)
    finally:
        d.stop()
    jid = expect(dm.req("POST", "/v1/jobs", {"tenant": "research/nlp", "cpus": 2},
                        token=dm.admin), 201)["id"]
    assert "memory" not in expect(dm.req("GET", "/v1/jobs/%d" % jid, token=dm.admin),
                                  200)["spec"]


def test_stored_zero_cpus_still_read():
    """A job an older allotd took with cpus 0 still reads after an upgrade (new ones are
    refused: the minimum is checked at submission, not on what the store holds)."""
    d = Daemon()
    try:
        expect(d.req("PUT", "/v1/tenants", TENANTS, token=d.admin), 200)
        jid = expect(d.req("POST", "/v1/jobs", {"tenant": "research/nlp", "cpus": 0.5},
                           token=d.admin), 201)["id"]
        admin = d.admin
        d.stop()
        db = sqlite3.connect(os.path.join(d.dir, "allot.db"))
        db.execute("UPDATE jobs SET spec = replace(spec, '\"cpus\":0.5', '\"cpus\":0') "
                   "WHERE id = ?", (jid,))
        db.commit()
        assert '"cpus":0' in db.execute("SELECT spec FROM jobs WHERE id = ?",
                                        (jid,)).fetchone()[0]
        db.close()
        d = Daemon(d.dir)
        d.admin = admin
        time.sleep(0.5)  # the loop has read it back
        j = expect(d.req("GET", "/v1/jobs/%d" % jid, token=d.admin), 200)
        assert j["state"] == "pending" and j["spec"]["cpus"] == 0, j
    finally:
        d.stop()


def test_big_specs_are_bounded():
    """What one submission may store is bounded: entries and bytes of command and env, and
    the spec times an array's members (413, nothing stored); a page of GET /v1/jobs stops
    after about 8 MiB of specs and the cursor goes on from there."""
    d = Daemon()
    try:
        expect(d.req("PUT", "/v1/tenants", TENANTS, token=d.admin), 200)
        base = {"tenant": "research/nlp", "hold": True}
        for extra, st, what in [
                ({"command": ["x"] * 4097}, 400, 'field "command" has 4097 entries: at most 4096'),
                ({"env": {"K%d" % i: "v" * 40 for i in range(4000)}}, 400,
                 'field "env" holds'),
                ({"command": ["x" * 100000], "array": "0-999"}, 413,
                 "1000 jobs of"),
        ]:
            b = expect(d.req("POST", "/v1/jobs", dict(base, **extra), token=d.admin), st)
            assert what in b["error"]["message"], (st, b)
        assert expect(d.req("GET", "/v1/jobs", token=d.admin), 200)["jobs"] == []
        big = ["x" * 100000]  # 100 kB each: 90 of them pass 8 MiB
        ids = [expect(d.req("POST", "/v1/jobs", dict(base, command=big), token=d.admin),
                      201)["id"] for _ in range(90)]
        p = expect(d.req("GET", "/v1/jobs?limit=1000", token=d.admin), 200)
        got = [j["id"] for j in p["jobs"]]
        assert 80 <= len(got) < 90 and p["next_cursor"] == got[-1], (len(got), p["next_cursor"])
        q = expect(d.req("GET", "/v1/jobs?limit=1000&cursor=%d" % p["next_cursor"],
                         token=d.admin), 200)
        assert got + [j["id"] for j in q["jobs"]] == ids and q["next_cursor"] == 0
        # small specs: a page goes on past the store's reads of 100 jobs at a time
        small = [expect(d.req("POST", "/v1/jobs", base, token=d.admin), 201)["id"]
                 for _ in range(130)]
        p = expect(d.req("GET", "/v1/jobs?limit=1000&cursor=%d" % ids[-1], token=d.admin), 200)
        assert [j["id"] for j in p["jobs"]] == small and p["next_cursor"] == 0, p["next_cursor"]
        p = expect(d.req("GET", "/v1/jobs?limit=101&cursor=%d" % ids[-1], token=d.admin), 200)
        assert [j["id"] for j in p["jobs"]] == small[:101] and p["next_cursor"] == small[100]
    finally:
        d.stop()


def test_jobs_per_tenant_limit():
    """--max-jobs-per-tenant bounds a tenant's pending, starting and running jobs (array
    members each count): past it a submission is 403 too_many_jobs and nothing of it is
    stored; other tenants are not held; an ended job frees its place; a retry of a stored
    job (its Idempotency-Key) is no new job."""
    d = Daemon(args=["--max-jobs-per-tenant", "3"])
    try:
        expect(d.req("PUT", "/v1/tenants", TENANTS, token=d.admin), 200)
        nlp = {"tenant": "research/nlp", "hold": True}
        first = expect(d.req("POST", "/v1/jobs", nlp, token=d.admin,
                             headers={"Idempotency-Key": "k1"}), 201)["id"]
        expect(d.req("POST", "/v1/jobs", nlp, token=d.admin), 201)
        b = expect(d.req("POST", "/v1/jobs", dict(nlp, array="0-1"), token=d.admin), 403)
        assert b["error"]["code"] == "too_many_jobs", b
        assert "research/nlp has 2 pending, starting or running jobs; 2 more" in \
            b["error"]["message"], b
        jobs = expect(d.req("GET", "/v1/jobs", token=d.admin), 200)["jobs"]
        assert len(jobs) == 2, jobs  # nothing of the array stored
        expect(d.req("POST", "/v1/jobs", nlp, token=d.admin), 201)
        expect(d.req("POST", "/v1/jobs", nlp, token=d.admin), 403)
        expect(d.req("POST", "/v1/jobs", nlp, token=d.admin, headers={"Idempotency-Key": "k1"}),
               200)  # the stored one again
        expect(d.req("POST", "/v1/jobs", {"tenant": "research/vision", "hold": True},
                     token=d.admin), 201)
        expect(d.req("POST", "/v1/jobs/%d/cancel" % first, token=d.admin), 200)
        expect(d.req("POST", "/v1/jobs", nlp, token=d.admin), 201)
    finally:
        d.stop()


def test_escapes_in_paths_and_queries():
    """An escaped NUL cuts no path or value short and an escaped slash in a path is no
    separator: such paths name no route, and nothing they seem to name changes. An
    escaped slash in a query value is a slash, as before."""
    a = dm.admin
    tok = expect(dm.req("POST", "/v1/tokens", {"role": "viewer", "tenant": "", "name": "esc"},
                        token=a), 201)
    jid = expect(dm.req("POST", "/v1/jobs", {"tenant": "research/nlp", "hold": True}, token=a),
                 201)["id"]
    expect(dm.req("DELETE", "/v1/tokens/%d%%00/x" % tok["id"], token=a), 404)
    expect(dm.req("GET", "/v1/whoami", token=tok["token"]), 200)  # not revoked
    expect(dm.req("GET", "/v1/jobs/%d%%2Fevents" % jid, token=a), 404)
    expect(dm.req("GET", "/v1/jobs/%d%%00/events" % jid, token=a), 404)
    expect(dm.req("GET", "/v1/jobs?limit=5%00zzz", token=a), 400)
    got = expect(dm.req("GET", "/v1/jobs?tenant=research%2Fnlp", token=a), 200)["jobs"]
    assert jid in [j["id"] for j in got], got
    # '+' is a space in a query, %2B a plus, and UTF-8 escapes are bytes
    odd = expect(dm.req("POST", "/v1/tokens", {"role": "admin", "tenant": "", "name": "\u00e9 b+c"},
                        token=a), 201)
    oid = expect(dm.req("POST", "/v1/jobs", {"tenant": "research/nlp", "hold": True},
                        token=odd["token"]), 201)["id"]
    for q in ("%C3%A9%20b%2Bc", "%C3%A9+b%2Bc", "%c3%a9+b%2bc"):
        got = expect(dm.req("GET", "/v1/jobs?user=" + q, token=a), 200)["jobs"]
        assert [j["id"] for j in got] == [oid], (q, got)
    expect(dm.req("POST", "/v1/jobs/%d/cancel" % oid, token=a), 200)
    b = expect(dm.req("GET", "/v1/jobs?subtree=true", token=a), 400)
    assert "subtree needs tenant" in b["error"]["message"], b
    # a body over the limit that the client holds back for 100 Continue: 413 at once
    c = dm.conn()
    try:
        c.putrequest("POST", "/v1/jobs")
        c.putheader("Authorization", "Bearer " + a)
        c.putheader("Content-Type", "application/json")
        c.putheader("Content-Length", "5000000")
        c.putheader("Expect", "100-continue")
        c.endheaders()
        r = c.getresponse()
        assert r.status == 413, (r.status, r.read())
    finally:
        c.close()
    expect(dm.req("POST", "/v1/jobs/%d/cancel" % jid, token=a), 200)


def test_retry_after_a_change():
    """A submission retried with its Idempotency-Key after the job's priority class or
    time limit changed is the same request: the job it made (200), not a 422."""
    a = dm.admin
    body = {"tenant": "research/nlp", "hold": True, "time_limit": 600, "command": ["true"]}
    key = {"Idempotency-Key": "retry-after-change"}
    jid = expect(dm.req("POST", "/v1/jobs", body, token=a, headers=key), 201)["id"]
    expect(dm.req("POST", "/v1/jobs/%d/time-limit" % jid, {"time_limit": 60}, token=a), 200)
    expect(dm.req("POST", "/v1/jobs/%d/priority" % jid, {"priority": "training"}, token=a), 200)
    again = expect(dm.req("POST", "/v1/jobs", body, token=a, headers=key), 200)
    assert again["id"] == jid and again["spec"]["time_limit"] == 60, again
    other = dict(body, cpus=2)  # another request under the key: still refused
    expect(dm.req("POST", "/v1/jobs", other, token=a, headers=key), 422)
    expect(dm.req("POST", "/v1/jobs/%d/cancel" % jid, token=a), 200)


def test_bodyless_routes_take_none_or_empty():
    """A route that takes no body takes an empty one or {} (as clients send), and refuses a
    field with a message naming it: the job is untouched."""
    jid = expect(dm.req("POST", "/v1/jobs", {"tenant": "research/nlp", "hold": True,
                                             "command": ["true"]}, token=dm.admin), 201)["id"]
    st, b = dm.req("POST", "/v1/jobs/%d/release" % jid, b'{"now":true}', token=dm.admin)
    assert st == 400 and b["error"]["message"] == 'unknown field "now"', (st, b)
    assert expect(dm.req("GET", "/v1/jobs/%d" % jid, token=dm.admin), 200)["held"] is True
    for _ in range(100):  # bounded: the loop gives the held job its reason
        if expect(dm.req("GET", "/v1/jobs/%d" % jid, token=dm.admin), 200)["pending_reason"]:
            break
        time.sleep(0.05)
    # the answers' reasons are what the loop will say, not the stored ones
    j = expect(dm.req("POST", "/v1/jobs/%d/release" % jid, b" {} ", token=dm.admin), 200)
    assert j["held"] is False and j["pending_reason"] is None, j
    for _ in range(100):  # bounded: the loop gives it a reason of the queue's
        j = expect(dm.req("GET", "/v1/jobs/%d" % jid, token=dm.admin), 200)
        if j["pending_reason"] and not j["pending_reason"].startswith("held"):
            break
        time.sleep(0.05)
    j = expect(dm.req("POST", "/v1/jobs/%d/hold" % jid, None, token=dm.admin), 200)
    assert j["pending_reason"] == "held: `allot release %d` lets it start" % jid, j
    expect(dm.req("POST", "/v1/jobs/%d/cancel" % jid, b"{}", token=dm.admin), 200)


def test_idempotency_key_is_printable_ascii():
    """An Idempotency-Key is 1..128 printable ASCII characters: a key the job's JSON could not
    show (Latin-1 bytes) is refused, and nothing is stored; one with a space is taken and
    shown as sent."""
    before = snapshot()
    st, b = dm.req("POST", "/v1/jobs", {"tenant": "research/nlp", "hold": True}, token=dm.admin,
                   headers={"Idempotency-Key": "cl\xe9"})
    assert st == 400 and "printable ASCII" in b["error"]["message"], (st, b)
    assert snapshot() == before
    j = expect(dm.req("POST", "/v1/jobs", {"tenant": "research/nlp", "hold": True},
                      token=dm.admin, headers={"Idempotency-Key": "run 7"}), 201)
    assert j["idempotency_key"] == "run 7", j
    expect(dm.req("POST", "/v1/jobs/%d/cancel" % j["id"], token=dm.admin), 200)


if __name__ == "__main__":
    dm = Daemon()
    try:
        expect(dm.req("PUT", "/v1/tenants", TENANTS, token=dm.admin), 200)
        fx.run([test_corpus, test_tenant_errors_name_the_entry, test_env_cannot_set_the_gpu_share,
                test_sql_looking_strings_are_stored_verbatim, test_default_memory,
                test_stored_zero_cpus_still_read, test_big_specs_are_bounded,
                test_jobs_per_tenant_limit, test_escapes_in_paths_and_queries,
                test_retry_after_a_change, test_bodyless_routes_take_none_or_empty,
                test_idempotency_key_is_printable_ascii])
    finally:
        dm.stop()
