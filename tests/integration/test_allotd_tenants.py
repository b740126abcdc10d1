"""Re-applying the tenant tree to a running allotd: the sums of nominals
that parents without a quota of their own (and the cluster's root) get are
made again on every apply, also for a cohort that was pruned and comes
back; a tenant with live jobs never becomes a parent; the tokens scoped to
a removed tenant are revoked, so a path used again later does not let
them back in; a write names the tree it read (If-Match its ETag), so
applies at the same time lose no change."""

import json
import os
import threading
import time

import allotd_fixture as fx
from allotd_fixture import Daemon, expect
from cli_fixture import cli, write

dm = None
AG = None


def tree(*tenants):
    return {"version": 1, "tenants": list(tenants)}


def put(doc, status=200):
    b = expect(dm.req("PUT", "/v1/tenants", doc, token=dm.admin), status)
    time.sleep(0.3)  # the loop takes each tree in turn (two at once would be one)
    return b


def submit(tenant, **kw):
    spec = {"tenant": tenant, "gpus": 1, "cpus": 0.1, "command": ["true"]}
    spec.update(kw)
    return expect(dm.req("POST", "/v1/jobs", spec, token=dm.admin), 201)["id"]


def states(ids):
    return [expect(dm.req("GET", "/v1/jobs/%d" % i, token=dm.admin), 200) for i in ids]


def wait_placed(ids, timeout=10):
    end = time.time() + timeout
    while time.time() < end:
        js = states(ids)
        if all(j["state"] == "starting" for j in js):
            return js
        time.sleep(0.05)
    raise AssertionError([(j["id"], j["state"], j.get("reason")) for j in js])


A = {"path": "lab/a", "quotas": {"gpu": 2}}
A6 = {"path": "lab/a", "quotas": {"gpu": 6}}
B = {"path": "tmp/b", "quotas": {"gpu": 2}}


def test_sums_follow_each_apply():
    expect(dm.req("POST", "/v1/nodes/register",
                  {"name": "t-1", "cpus": 16, "memory": 65536, "gpus": [{"model": "L4"}] * 8},
                  token=AG), 201)
    put(tree(A))
    put(tree(A6))  # the cluster's quota was 2 (the first sum) and stayed so
    jobs = [submit("lab/a") for _ in range(4)]
    wait_placed(jobs)
    # a cohort pruned and listed again sums its child's nominal anew
    put(tree(A6, B))
    put(tree(A6))
    put(tree(A6, B))
    wait_placed([submit("tmp/b")])


def test_busy_tenant_never_becomes_a_parent():
    held = submit("lab/a", hold=True)
    st, b = dm.req("PUT", "/v1/tenants", tree(A6, B, {"path": "lab/a/sub"}), token=dm.admin)
    assert st == 409 and b["error"]["message"] == (
        "tenant lab/a still has live jobs; it cannot become the parent of lab/a/sub"), (st, b)
    paths = [t["path"] for t in expect(dm.req("GET", "/v1/tenants", token=dm.admin), 200)[
        "tenants"]]
    assert "lab/a/sub" not in paths, paths
    expect(dm.req("POST", "/v1/jobs/%d/cancel" % held, token=dm.admin), 200)


def test_removed_tenant_tokens_revoked():
    member = dm.token("member", "tmp/b", "tmp-b-member")
    org = dm.token("tenant-admin", "tmp", "tmp-admin")  # an organisation no entry names
    other = dm.token("member", "lab/a", "lab-a-member")
    expect(dm.req("GET", "/v1/jobs", token=member), 200)
    for j in expect(dm.req("GET", "/v1/jobs?tenant=tmp/b", token=dm.admin), 200)["jobs"]:
        dm.req("POST", "/v1/jobs/%d/cancel" % j["id"], token=dm.admin)
    end = time.time() + 10
    while dm.req("PUT", "/v1/tenants", tree(A6), token=dm.admin)[0] != 200:
        assert time.time() < end, "tmp/b's job did not end"
        time.sleep(0.1)
    assert dm.req("GET", "/v1/jobs", token=member)[0] == 401
    assert dm.req("GET", "/v1/jobs", token=org)[0] == 401
    put(tree(A6, B))  # the path again: the old tokens stay out
    assert dm.req("GET", "/v1/jobs", token=member)[0] == 401
    assert dm.req("GET", "/v1/jobs", token=org)[0] == 401
    expect(dm.req("GET", "/v1/jobs", token=other), 200)
    toks = expect(dm.req("GET", "/v1/tokens", token=dm.admin), 200)["tokens"]
    assert [t["revoked"] > 0 for t in toks if t["name"] in ("tmp-b-member", "lab-a-member")] \
        == [True, False], toks


def etag():
    c = dm.conn()
    try:
        c.request("GET", "/v1/tenants", headers={"Authorization": "Bearer " + dm.admin})
        r = c.getresponse()
        r.read()
        assert r.status == 200, r.status
        return r.getheader("ETag")
    finally:
        c.close()


def test_if_match():
    tag = etag()
    assert len(tag) == 18 and tag[0] == tag[-1] == '"', tag
    doc = expect(dm.req("GET", "/v1/tenants", token=dm.admin), 200)
    doc["tenants"].append({"path": "lab/c"})
    put(tree(A6, B, {"path": "lab/d"}))  # someone else writes in between
    st, b = dm.req("PUT", "/v1/tenants", doc, token=dm.admin, headers={"If-Match": tag})
    assert st == 412 and b["error"]["code"] == "precondition_failed", (st, b)
    paths = [t["path"] for t in expect(dm.req("GET", "/v1/tenants", token=dm.admin), 200)[
        "tenants"]]
    assert "lab/d" in paths and "lab/c" not in paths, paths
    # weak (as a proxy may make it) and in a list, the tag still matches
    expect(dm.req("PUT", "/v1/tenants", tree(A6, B), token=dm.admin,
                  headers={"If-Match": '"0000000000000000", W/' + etag()}), 200)


def test_applies_at_once_lose_nothing():
    files = []
    for i in range(6):
        files.append(write(os.path.join(fx.tempdir(), "r%d.yaml" % i),
                           "version: 1\ntenants:\n  - path: race/t%d\n" % i))
    results = [None] * len(files)

    def apply(i):
        results[i] = cli(dm, "apply", "-f", files[i], timeout=60)

    threads = [threading.Thread(target=apply, args=(i,)) for i in range(len(files))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=90)
    assert all(r is not None and r.rc == 0 for r in results), results
    paths = [t["path"] for t in expect(dm.req("GET", "/v1/tenants", token=dm.admin), 200)[
        "tenants"]]
    assert all("race/t%d" % i in paths for i in range(len(files))), paths
    assert "lab/a" in paths and "tmp/b" in paths, paths


def test_dry_run_checks_as_a_write():
    before = expect(dm.req("GET", "/v1/tenants", token=dm.admin), 200)
    st, b = dm.req("POST", "/v1/tenants/check", tree(A6, {"path": "x/y", "weight": -1}),
                   token=dm.admin)
    assert st == 422, (st, b)
    held = submit("tmp/b", hold=True)
    st, b = dm.req("POST", "/v1/tenants/check", tree(A6), token=dm.admin)
    assert st == 409 and "tmp/b still has live jobs" in b["error"]["message"], (st, b)
    b = expect(dm.req("POST", "/v1/tenants/check", tree(A6, B, {"path": "new/t"}),
                      token=dm.admin), 200)
    assert b == {"tenants": 3, "priority_classes": 0}, b
    assert expect(dm.req("GET", "/v1/tenants", token=dm.admin), 200) == before
    # the command line: a file allotd would refuse fails its dry run too, and a
    # file with no change is checked all the same
    typo = write(os.path.join(fx.tempdir(), "typo.yaml"),
                 "version: 1\ntenants:\n  - path: lab/a\n    wieght: 3\n")
    r = cli(dm, "apply", "-f", typo, "--dry-run")
    assert r.rc == 6 and "wieght" in r.err, r
    gone = write(os.path.join(fx.tempdir(), "gone.yaml"),
                 "version: 1\ntenants:\n  - path: lab/a\n    quotas: {gpu: 6}\n")
    r = cli(dm, "apply", "-f", gone, "--prune", "--dry-run")
    assert r.rc != 0 and "tmp/b still has live jobs" in r.err, r
    v7 = write(os.path.join(fx.tempdir(), "v7.yaml"),
               "version: 7\ntenants:\n  - path: lab/a\n    quotas: {gpu: 6}\n")
    r = cli(dm, "apply", "-f", v7)
    assert r.rc == 6 and "version" in r.err, r
    # a token that may not write the tree: the diff, unchecked, and said so
    viewer = dm.token("viewer", "", "v-dry")
    r = cli(dm, "apply", "-f", typo, "--dry-run", token=viewer)
    assert r.rc == 0 and "not checked by allotd (only an admin's dry run is)" in r.err, r
    expect(dm.req("POST", "/v1/jobs/%d/cancel" % held, token=dm.admin), 200)
    assert expect(dm.req("GET", "/v1/tenants", token=dm.admin), 200) == before


def test_parent_limit_without_nominal():
    """A parent may give its borrow_limit without a nominal: its nominal is
    its tenants' sum. org (borrow_limit 0) over org/a (1 GPU) and org/b (1):
    on an idle 8-GPU node org/a starts 2 jobs (its own 1 and b's unused 1,
    inside org), not more. A leaf without its nominal is refused."""
    d = Daemon()
    try:
        ag = d.token("agent", "", "agents")
        expect(d.req("POST", "/v1/nodes/register",
                     {"name": "o-1", "cpus": 16, "memory": 65536, "gpus": [{"model": "L4"}] * 8},
                     token=ag), 201)
        doc = tree({"path": "org", "quotas": {"gpu": {"borrow_limit": 0}}},
                   {"path": "org/a", "quotas": {"gpu": 1}},
                   {"path": "org/b", "quotas": {"gpu": 1}},
                   {"path": "other", "quotas": {"gpu": 6}})
        expect(d.req("PUT", "/v1/tenants", doc, token=d.admin), 200)
        time.sleep(0.3)
        ids = [expect(d.req("POST", "/v1/jobs", {"tenant": "org/a", "gpus": 1, "cpus": 0.1,
                                                 "command": ["true"]}, token=d.admin),
                      201)["id"] for _ in range(4)]
        end = time.time() + 10
        while time.time() < end:
            js = [expect(d.req("GET", "/v1/jobs/%d" % i, token=d.admin), 200) for i in ids]
            if sum(j["state"] == "starting" for j in js) >= 2 and \
                    all(j["state"] == "starting" or j["pending_reason"] for j in js):
                break
            time.sleep(0.05)
        assert [j["state"] for j in js].count("starting") == 2, js
        waiting = [j for j in js if j["state"] == "pending"]
        assert all("org" in j["pending_reason"] for j in waiting), waiting
        st, b = d.req("PUT", "/v1/tenants", tree({"path": "x", "quotas": {"gpu": {
            "borrow_limit": 1}}}), token=d.admin)
        assert st in (400, 422) and "nominal is missing" in b["error"]["message"], (st, b)
    finally:
        d.stop()


def test_scoped_dry_run_compares_its_part():
    """A token bound to a tenant reads only its part of the tree: its dry run of the whole
    tree compares that part (no tenant outside it reads as created) and says so; a change
    inside it is shown."""
    d = Daemon()
    try:
        expect(d.req("PUT", "/v1/tenants", fx.TENANTS, token=d.admin), 200)
        doc = expect(d.req("GET", "/v1/tenants", token=d.admin), 200)
        whole = write(os.path.join(fx.tempdir(), "whole.json"), json.dumps(doc))
        member = d.token("member", "research", "scoped")
        r = cli(d, "apply", "-f", whole, "--dry-run", token=member)
        assert r.rc == 0 and "(dry run: 0 changes, nothing applied)" in r.out, r
        assert "compared below research only" in r.err, r
        for t in doc["tenants"]:
            if t["path"] == "research/nlp":
                t["weight"] = 3
        changed = write(os.path.join(fx.tempdir(), "changed.json"), json.dumps(doc))
        r = cli(d, "apply", "-f", changed, "--dry-run", token=member)
        assert r.rc == 0 and "(dry run: 1 change, nothing applied)" in r.out, r
        assert "research/nlp" in r.out and "product" not in r.out, r
    finally:
        d.stop()


def test_isolation_change_waits_for_running_jobs():
    """A tenant's isolation level changes only while it has no live job: running work
    holds nodes or GPUs as the old level says, and waiting jobs were queued with it, so
    under the new one other tenants' work would be placed beside them, and allotd
    restarted would adopt neither and stop it."""
    c = {"path": "tmp/c", "quotas": {"gpu": 2}}
    put(tree(A6, B, c))
    run = submit("tmp/c")
    wait_placed([run])
    excl = dict(c, isolation="exclusive-node")
    st, b = dm.req("PUT", "/v1/tenants", tree(A6, B, excl), token=dm.admin)
    assert st == 409 and b["error"]["message"] == (
        "tenant tmp/c still has live jobs; its isolation level (shared -> exclusive-node) "
        "changes only when it has none (they run, or were queued, as shared)"), (st, b)
    iso = {t["path"]: t.get("isolation") for t in
           expect(dm.req("GET", "/v1/tenants", token=dm.admin), 200)["tenants"]}
    assert iso["tmp/c"] == "shared", iso
    expect(dm.req("POST", "/v1/jobs/%d/cancel" % run, token=dm.admin), 200)
    held = submit("tmp/c", hold=True)  # a waiting one too
    assert dm.req("PUT", "/v1/tenants", tree(A6, B, excl), token=dm.admin)[0] == 409
    expect(dm.req("POST", "/v1/jobs/%d/cancel" % held, token=dm.admin), 200)
    put(tree(A6, B, excl))  # none left: it changes
    put(tree(A6, B, c))


def test_unlisted_parent_gets_defaults():
    """A tree is the whole tree: a stored parent it implies (a child is listed) but does not
    list becomes a tenant of weight 1 and no quota of its own, not what an earlier tree
    gave it; allot apply --prune says so (configured)."""
    grp = {"path": "grp", "weight": 3, "quotas": {"gpu": {"borrow_limit": 1}}}
    x = {"path": "grp/x", "quotas": {"gpu": 1}}

    def stored(path):
        return [t for t in expect(dm.req("GET", "/v1/tenants", token=dm.admin), 200)["tenants"]
                if t["path"] == path][0]

    put(tree(A6, B, grp, x))
    assert stored("grp")["weight"] == 3 and stored("grp").get("quotas"), stored("grp")
    put(tree(A6, B, x))
    g = stored("grp")
    assert g["weight"] == 1 and not g.get("quotas"), g
    put(tree(A6, B, grp, x))
    f = write(os.path.join(fx.tempdir(), "t.json"), json.dumps(tree(A6, B, x)))
    r = cli(dm, "apply", "-f", f, "--prune")
    assert r.rc == 0 and "tenant/grp configured" in r.lines(), r
    g = stored("grp")
    assert g["weight"] == 1 and not g.get("quotas"), g


def test_overcommitted_nominals_warned():
    """Nominals that sum to more GPUs than the nodes have are taken (nodes may join), with
    a warning in the reply that allot apply prints: not every guarantee can be met."""
    big = {"path": "tmp/big", "quotas": {"gpu": 4}}
    b = put(tree(A6, B, big))  # 6 + 2 + 4 on the 8 GPUs of t-1
    assert b["warnings"] == ["the tenants' GPU nominals sum to 12 GPUs; the registered nodes "
                             "have 8: not every tenant's guarantee can be met at once"], b
    assert "warnings" not in put(tree(A6, B)), "8 of 8: no warning"
    f = write(os.path.join(fx.tempdir(), "t.json"), json.dumps(tree(A6, B, big)))
    r = cli(dm, "apply", "-f", f, "--prune")
    assert r.rc == 0 and "allot: warning: the tenants' GPU nominals sum to 12 GPUs" in r.err, r
    put(tree(A6, B))


if __name__ == "__main__":
    dm = Daemon()
    try:
        AG = dm.token("agent", "", "agents")
        fx.run([test_sums_follow_each_apply, test_busy_tenant_never_becomes_a_parent,
                test_removed_tenant_tokens_revoked, test_if_match,
                test_applies_at_once_lose_nothing, test_dry_run_checks_as_a_write,
                test_parent_limit_without_nominal, test_scoped_dry_run_compares_its_part,
                test_isolation_change_waits_for_running_jobs, test_unlisted_parent_gets_defaults,
                test_overcommitted_nominals_warned])
    finally:
        dm.stop()
