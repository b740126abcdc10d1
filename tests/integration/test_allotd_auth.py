"""Bearer tokens, roles and the audit log of allotd: token create, list and
revoke (shown once, 409 on a second revoke, 401 once revoked), the
authorization matrix of every route for admin, tenant-admin, member,
viewer, agent and no token, tenant scoping (a member never sees another
tenant's jobs: 404), and the hash-chained audit log (list, verify)."""

import json
import os
import time

import allotd_fixture as fx
from allotd_fixture import TENANTS, Daemon, expect

dm = None
T = {}


def setup():
    expect(dm.req("PUT", "/v1/tenants", TENANTS, token=dm.admin), 200)
    T["admin"] = dm.admin
    T["tadmin"] = dm.token("tenant-admin", "research", "ta")
    T["member"] = dm.token("member", "research/nlp", "alice")
    T["other"] = dm.token("member", "product/search", "bob")
    T["viewer"] = dm.token("viewer", "", "v")
    T["agent"] = dm.token("agent", "", "node-agent")
    T["none"] = None


def test_token_lifecycle():
    st, b = dm.req("POST", "/v1/tokens", {"role": "viewer", "name": "tmp"}, token=dm.admin)
    assert st == 201 and b["token"].startswith("allot_") and b["role"] == "viewer", b
    tok, tid = b["token"], b["id"]
    expect(dm.req("GET", "/v1/tenants", token=tok), 200)
    lst = expect(dm.req("GET", "/v1/tokens", token=dm.admin), 200)["tokens"]
    assert any(t["id"] == tid for t in lst)
    assert all("token" not in t for t in lst), "a listing must never show secrets"
    expect(dm.req("DELETE", "/v1/tokens/%d" % tid, token=dm.admin), 200)
    expect(dm.req("DELETE", "/v1/tokens/%d" % tid, token=dm.admin), 409)
    expect(dm.req("DELETE", "/v1/tokens/99999", token=dm.admin), 404)
    expect(dm.req("DELETE", "/v1/tokens/abc", token=dm.admin), 404)
    expect(dm.req("GET", "/v1/tenants", token=tok), 401)
    expect(dm.req("POST", "/v1/tokens", {"role": "emperor"}, token=dm.admin), 422)
    expect(dm.req("POST", "/v1/tokens", {"role": "member"}, token=dm.admin), 422)
    expect(dm.req("POST", "/v1/tokens", {"role": 3}, token=dm.admin), 400)


def test_token_expires():
    """A token made for a time (duration_s) works until then, and is refused after with a
    401 that says when it expired, cached or not; the listing shows when. A duration out
    of 1..10 years or of the wrong type is refused; without one a token does not expire."""
    b = expect(dm.req("POST", "/v1/tokens", {"role": "viewer", "name": "short", "duration_s": 2},
                      token=dm.admin), 201)
    assert b["expires"] - b["created"] == 2, b
    unused = expect(dm.req("POST", "/v1/tokens", {"role": "viewer", "duration_s": 1},
                           token=dm.admin), 201)  # first used once expired: not cached
    expect(dm.req("GET", "/v1/tenants", token=b["token"]), 200)  # now cached
    lst = expect(dm.req("GET", "/v1/tokens", token=dm.admin), 200)["tokens"]
    assert [t["expires"] for t in lst if t["id"] == b["id"]] == [b["expires"]], lst
    end = time.time() + 10
    while time.time() < end and dm.req("GET", "/v1/tenants", token=b["token"])[0] == 200:
        time.sleep(0.1)  # bounded: until its time is up
    e = expect(dm.req("GET", "/v1/tenants", token=b["token"]), 401)
    assert "the token expired at " in e["error"]["message"], e
    assert time.time() >= b["expires"] - 1, (time.time(), b)
    e = expect(dm.req("GET", "/v1/tenants", token=unused["token"]), 401)
    assert "the token expired at " in e["error"]["message"], e
    for bad, st in ((0, 422), (3650 * 86400 + 1, 422), ("1h", 400), (1.5, 400)):
        e = expect(dm.req("POST", "/v1/tokens", {"role": "viewer", "duration_s": bad},
                          token=dm.admin), st)
        assert '"duration_s"' in e["error"]["message"], e
    forever = expect(dm.req("POST", "/v1/tokens", {"role": "viewer"}, token=dm.admin), 201)
    assert forever["expires"] == 0, forever
    # a token made for a time makes none that outlives it
    hour = expect(dm.req("POST", "/v1/tokens", {"role": "admin", "duration_s": 3600},
                         token=dm.admin), 201)
    for body in ({"role": "viewer"}, {"role": "viewer", "duration_s": 7200}):
        made = expect(dm.req("POST", "/v1/tokens", body, token=hour["token"]), 201)
        assert made["expires"] == hour["expires"], (made, hour)
    made = expect(dm.req("POST", "/v1/tokens", {"role": "viewer", "duration_s": 60},
                         token=hour["token"]), 201)
    assert made["expires"] < hour["expires"], made


def test_tenant_admin_manages_its_subtree_only():
    ta = T["tadmin"]
    st, b = dm.req("POST", "/v1/tokens", {"role": "member", "tenant": "research/vision"}, token=ta)
    assert st == 201, b
    vid = b["id"]
    expect(dm.req("POST", "/v1/tokens", {"role": "member", "tenant": "product/search"},
                  token=ta), 403)
    expect(dm.req("POST", "/v1/tokens", {"role": "admin"}, token=ta), 403)
    expect(dm.req("POST", "/v1/tokens", {"role": "agent"}, token=ta), 403)
    st, b = dm.req("POST", "/v1/tokens", {"role": "viewer", "tenant": ""}, token=ta)
    assert st == 403 and b["error"]["message"] == (
        "a tenant-admin may not create viewer tokens for the whole cluster"), (st, b)
    # a token's name is a short label: long or control characters are refused, and
    # ':' (a job's user is TENANT:NAME: no name may pass for another tenant's user)
    for name in ("x" * 129, "a\nb", "research/vision:alice"):
        st, b = dm.req("POST", "/v1/tokens", {"role": "member", "tenant": "research/vision",
                                              "name": name}, token=ta)
        assert st == 422 and 'field "name"' in b["error"]["message"], (st, b)
    ids = [t["id"] for t in expect(dm.req("GET", "/v1/tokens", token=ta), 200)["tokens"]]
    assert vid in ids and 1 not in ids, ids
    # bob's token (product/search) is invisible to research's admin
    bob = [t for t in expect(dm.req("GET", "/v1/tokens", token=dm.admin), 200)["tokens"]
           if t["name"] == "bob"][0]
    expect(dm.req("DELETE", "/v1/tokens/%d" % bob["id"], token=ta), 404)
    expect(dm.req("DELETE", "/v1/tokens/%d" % vid, token=ta), 200)


def test_tenant_admin_token_cap():
    """A tenant-admin makes at most 1,000 tokens that are neither revoked nor expired in its
    subtree: past them 403 too_many_tokens, nothing stored; a revocation makes room. A
    cluster admin has no bound."""
    from concurrent.futures import ThreadPoolExecutor
    pa = dm.token("tenant-admin", "product", "pa")
    before = len(expect(dm.req("GET", "/v1/tokens", token=pa), 200)["tokens"])

    def make(i):
        return dm.req("POST", "/v1/tokens", {"role": "member", "tenant": "product/search",
                                             "name": "cap-%d" % i}, token=pa)
    with ThreadPoolExecutor(8) as ex:
        got = list(ex.map(make, range(1000 - before)))
    assert all(st == 201 for st, _ in got), [b for st, b in got if st != 201][:3]
    st, b = make(-1)
    assert st == 403 and b["error"]["code"] == "too_many_tokens", (st, b)
    assert "1000 tokens" in b["error"]["message"], b
    ls = expect(dm.req("GET", "/v1/tokens", token=pa), 200)["tokens"]
    assert len(ls) == 1000 and "cap--1" not in [t["name"] for t in ls], len(ls)
    expect(dm.req("DELETE", "/v1/tokens/%d" % got[0][1]["id"], token=pa), 200)
    assert make(-2)[0] == 201
    # a cluster admin is not bound
    expect(dm.req("POST", "/v1/tokens", {"role": "member", "tenant": "product/search"},
                  token=dm.admin), 201)


def test_token_scope_checked():
    """A token's tenant is checked: admin and agent tokens act cluster-wide
    and take none, and a tenant must exist."""
    for role in ("admin", "agent"):
        err = expect(dm.req("POST", "/v1/tokens", {"role": role, "tenant": "research"},
                            token=dm.admin), 422)
        assert "acts cluster-wide and takes no tenant" in err["error"]["message"], err
    for role in ("member", "viewer", "tenant-admin"):
        err = expect(dm.req("POST", "/v1/tokens", {"role": role, "tenant": "nosuch/x"},
                            token=dm.admin), 422)
        assert "no tenant \"nosuch/x\"" in err["error"]["message"], err
    # an interior tenant is a subtree: fine
    expect(dm.req("POST", "/v1/tokens", {"role": "viewer", "tenant": "research"},
                  token=dm.admin), 201)
    # outside a tenant-admin's scope, a tenant there or not is refused alike
    for tenant in ("product/search", "nosuch/x"):
        err = expect(dm.req("POST", "/v1/tokens", {"role": "member", "tenant": tenant},
                            token=T["tadmin"]), 403)
        assert "may not create member tokens" in err["error"]["message"], err


def test_last_admin_token_kept():
    """The last cluster-wide admin token cannot be revoked (nothing could
    make tokens again); with another one it can."""
    d = Daemon()
    try:
        first = expect(d.req("GET", "/v1/whoami", token=d.admin), 200)["token_id"]
        err = expect(d.req("DELETE", "/v1/tokens/%d" % first, token=d.admin), 409)
        assert "last cluster-wide admin token" in err["error"]["message"], err
        # one made for a time runs out: it does not count
        tmp = expect(d.req("POST", "/v1/tokens", {"role": "admin", "duration_s": 3600},
                           token=d.admin), 201)
        err = expect(d.req("DELETE", "/v1/tokens/%d" % first, token=tmp["token"]), 409)
        assert "that does not expire" in err["error"]["message"], err
        expect(d.req("GET", "/v1/tokens", token=d.admin), 200)  # still works
        b = expect(d.req("POST", "/v1/tokens", {"role": "admin", "name": "second"},
                         token=d.admin), 201)
        expect(d.req("DELETE", "/v1/tokens/%d" % first, token=b["token"]), 200)
        expect(d.req("GET", "/v1/tokens", token=d.admin), 401)
        err = expect(d.req("DELETE", "/v1/tokens/%d" % b["id"], token=b["token"]), 409)
        assert "last cluster-wide admin token" in err["error"]["message"], err
        au = [(e["target"], e["result"]) for e in expect(d.req(
            "GET", "/v1/audit?limit=100", token=b["token"]), 200)["entries"]
            if e["action"] == "token.revoke"]
        assert au == [("/v1/tokens/%d" % first, "error 409"), ("/v1/tokens/%d" % first,
                                                                 "error 409"),
                      ("token/%d" % first, "ok"),
                      ("/v1/tokens/%d" % b["id"], "error 409")], au
        # an organisation only its teams' paths name is a tenant a token may name
        expect(d.req("PUT", "/v1/tenants", {"version": 1, "tenants": [{"path": "org9/team"}]},
                     token=b["token"]), 200)
        expect(d.req("POST", "/v1/tokens", {"role": "tenant-admin", "tenant": "org9"},
                     token=b["token"]), 201)
        expect(d.req("POST", "/v1/tokens", {"role": "tenant-admin", "tenant": "org"},
                     token=b["token"]), 422)
    finally:
        d.stop()


# route -> expected status per role (admin, tadmin, member, viewer, agent, none)
NODE = {"name": "auth-n1", "cpus": 8, "memory": 65536, "gpus": [{"model": "A100-80GB"}]}
MATRIX = [
    ("GET", "/v1/tokens", None, (200, 200, 403, 403, 403, 401)),
    ("POST", "/v1/tokens", {"role": "viewer", "tenant": "research"},
     (201, 201, 403, 403, 403, 401)),
    ("GET", "/v1/audit", None, (200, 403, 403, 403, 403, 401)),
    ("GET", "/v1/audit/verify", None, (200, 403, 403, 403, 403, 401)),
    ("PUT", "/v1/tenants", TENANTS, (200, 403, 403, 403, 403, 401)),
    ("GET", "/v1/tenants", None, (200, 200, 200, 200, 403, 401)),
    ("POST", "/v1/jobs", {"tenant": "research/nlp", "cpus": 1},
     (201, 201, 201, 403, 403, 401)),
    ("GET", "/v1/jobs", None, (200, 200, 200, 200, 403, 401)),
    ("GET", "/v1/nodes", None, (200, 200, 200, 200, 403, 401)),
    ("POST", "/v1/nodes/register", NODE, (201, 403, 403, 403, 200, 401)),
    ("POST", "/v1/nodes/auth-n1/heartbeat", {}, (200, 403, 403, 403, 200, 401)),
    ("POST", "/v1/nodes/auth-n1/uncordon", None, (200, 403, 403, 403, 403, 401)),
    ("GET", "/healthz", None, (200,) * 6),
    ("GET", "/readyz", None, (200,) * 6),
    ("GET", "/metrics", None, (200,) * 6),
]
ROLES = ("admin", "tadmin", "member", "viewer", "agent", "none")


def test_authorization_matrix():
    for method, path, body, want in MATRIX:
        for role, w in zip(ROLES, want):
            st, b = dm.req(method, path, body, token=T[role])
            assert st == w, "%s %s as %s: want %d got %d %r" % (method, path, role, w, st, b)


def test_two_authorization_headers():
    """A request with two Authorization headers is refused (400) whatever they hold, before
    any token is read: allotd must not pick one of them for the client."""
    before = len(expect(dm.req("GET", "/v1/jobs?limit=1000", token=dm.admin), 200)["jobs"])
    for path, method, body in (("/v1/jobs", "POST", {"tenant": "research/nlp", "cpus": 1}),
                               ("/v1/jobs", "GET", None), ("/metrics", "GET", None)):
        for first, second in ((dm.admin, T["viewer"]), (T["viewer"], dm.admin),
                              (dm.admin, dm.admin), ("nonsense", dm.admin)):
            c = dm.conn()
            try:
                c.putrequest(method, path)
                c.putheader("Authorization", "Bearer " + first)
                c.putheader("Authorization", "Bearer " + second)
                data = json.dumps(body).encode() if body is not None else b""
                if body is not None:
                    c.putheader("Content-Type", "application/json")
                c.putheader("Content-Length", str(len(data)))
                c.endheaders(data)
                r = c.getresponse()
                got = (r.status, json.loads(r.read()))
            finally:
                c.close()
            b = expect(got, 400, "%s %s with two Authorization headers" % (method, path))
            assert b["error"]["code"] == "bad_request", b
            assert "Authorization" in b["error"]["message"], b
    after = len(expect(dm.req("GET", "/v1/jobs?limit=1000", token=dm.admin), 200)["jobs"])
    assert after == before, "a refused request must submit nothing"


def test_metrics_auth():
    """/metrics needs no token by default (the matrix above); with --metrics-auth, on the
    command line or in the config file, it answers 401 without a valid token and 200 with a
    token of any role, leaving out the tenants the token may not see."""
    conf = os.path.join(fx.tempdir(), "allotd.conf")
    with open(conf, "w") as f:
        f.write("metrics-auth yes\n")
    for args in (["--metrics-auth"], ["--config", conf]):
        d = Daemon(args=args)
        try:
            for tok in (None, "allot_" + "0" * 64):
                b = expect(d.req("GET", "/metrics", token=tok), 401, "/metrics, token %r" % tok)
                assert b["error"]["code"] == "unauthorized", b
            expect(d.req("PUT", "/v1/tenants", TENANTS, token=d.admin), 200)
            end = time.time() + 10  # the scheduling loop takes the tree at its next cycle
            while 'allot_tenant_gpus{tenant="product/search"}' not in \
                    d.req("GET", "/metrics", token=d.admin, raw=True)[1] and time.time() < end:
                time.sleep(0.05)
            for role, tenant in (("admin", None), ("viewer", ""), ("member", "research/nlp"),
                                 ("agent", "")):
                tok = d.admin if tenant is None else d.token(role, tenant, "m-" + role)
                st, text = d.req("GET", "/metrics", token=tok, raw=True)
                assert st == 200 and "allot_api_requests_total" in text, (role, st, text[:200])
                # a token bound to a tenant reads its tenants' figures only
                nlp = 'allot_tenant_gpus{tenant="research/nlp"}' in text
                search = 'allot_tenant_gpus{tenant="product/search"}' in text
                assert (nlp, search) == {"admin": (True, True), "viewer": (True, True),
                                         "member": (True, False),
                                         "agent": (False, False)}[role], (role, text)
            # the scrapes without a token were refused before any figure was read, and counted
            st, text = d.req("GET", "/metrics", token=d.admin, raw=True)
            assert 'route="/metrics",code="401"} 2' in text, text
            # /healthz and /readyz stay public
            expect(d.req("GET", "/healthz"), 200)
            expect(d.req("GET", "/readyz"), 200)
        finally:
            d.stop()
    # --no-metrics-auth after it on the command line: public again
    d = Daemon(args=["--metrics-auth", "--no-metrics-auth"])
    try:
        st, text = d.req("GET", "/metrics", raw=True)
        assert st == 200 and "allot_api_requests_total" in text, (st, text[:200])
    finally:
        d.stop()


def test_jobs_are_scoped_to_tenants():
    st, j = dm.req("POST", "/v1/jobs", {"tenant": "product/search", "name": "secret"},
                   token=T["other"])
    assert st == 201, j
    jid = j["id"]
    # alice (research/nlp) cannot see, read, cancel or list bob's job: 404 / absent
    expect(dm.req("GET", "/v1/jobs/%d" % jid, token=T["member"]), 404)
    expect(dm.req("GET", "/v1/jobs/%d/events" % jid, token=T["member"]), 404)
    expect(dm.req("POST", "/v1/jobs/%d/cancel" % jid, token=T["member"]), 404)
    expect(dm.req("GET", "/v1/jobs/%d" % jid, token=T["tadmin"]), 404)
    for q in ("", "?tenant=product/search", "?tenant=product&subtree=1"):
        jobs = expect(dm.req("GET", "/v1/jobs" + q, token=T["member"]), 200)["jobs"]
        assert all(x["tenant"] == "research/nlp" for x in jobs), jobs
    # alice may not submit into bob's tenant
    expect(dm.req("POST", "/v1/jobs", {"tenant": "product/search"}, token=T["member"]), 403)
    # a cluster-wide viewer sees it but may not cancel it
    expect(dm.req("GET", "/v1/jobs/%d" % jid, token=T["viewer"]), 200)
    expect(dm.req("POST", "/v1/jobs/%d/cancel" % jid, token=T["viewer"]), 403)
    # tenant-scoped tenant listing
    paths = [t["path"] for t in
             expect(dm.req("GET", "/v1/tenants", token=T["member"]), 200)["tenants"]]
    assert paths == ["research/nlp"], paths
    expect(dm.req("POST", "/v1/jobs/%d/cancel" % jid, token=T["other"]), 200)


def test_refusals_audited_within_a_budget():
    """A token refused in a loop cannot fill the store with audit entries: ten refusals
    in each ten seconds are audited, and the next one audited counts those that were
    not."""
    b = expect(dm.req("POST", "/v1/tokens", {"role": "viewer", "name": "looper"},
                      token=dm.admin), 201)
    tid, tok = b["id"], b["token"]
    for _ in range(30):  # well inside one second: two windows at most
        expect(dm.req("POST", "/v1/jobs/999999/cancel", token=tok), 404)
    mine = [e for e in dm.audit() if e["token_id"] == tid and e["result"].startswith("error")]
    assert 10 <= len(mine) <= 20, mine
    time.sleep(10.5)  # the next window
    expect(dm.req("POST", "/v1/jobs/999999/cancel", token=tok), 404)
    last = [e for e in dm.audit() if e["token_id"] == tid][-1]
    assert last["result"] == "error 404 (%d refused calls before it not audited)" % (
        30 - len(mine)), last


def test_audit_log():
    # a refused call's path with a newline and an escape sequence is stored escaped
    expect(dm.req("POST", "/v1/jobs/1%0a2026-01-01%20token.revoke%20ok%1b%5b2J/cancel",
                  token=dm.admin), 404)
    entries = dm.audit(page=50)
    odd = [e["target"] for e in entries if "token.revoke" in e["target"]]
    assert odd == ["/v1/jobs/1%0A2026-01-01 token.revoke ok%1B[2J/cancel"], odd
    # a byte that is no UTF-8, and a C1 control, are listed (escaped), not dropped
    n = len(entries)
    expect(dm.req("POST", "/v1/jobs/%FF%C2%9B/cancel", token=dm.admin), 404)
    entries = dm.audit(page=50)
    assert len(entries) == n + 1 and entries[-1]["target"] == "/v1/jobs/%FF%C2%9B/cancel", \
        entries[-1]
    seqs = [e["seq"] for e in entries]
    assert seqs == list(range(1, len(seqs) + 1)), seqs
    actions = {e["action"] for e in entries}
    assert {"store.init", "token.create", "token.revoke", "tenant.apply", "job.submit",
            "job.cancel", "node.register"} <= actions, actions
    denied = [e for e in entries if e["result"] == "error 403"]
    assert denied, "refused mutating calls are audited too"
    assert all(e["token_id"] > 0 for e in denied)
    v = expect(dm.req("GET", "/v1/audit/verify", token=dm.admin), 200)
    assert v["ok"] is True and v["entries"] == len(entries), v
    expect(dm.req("GET", "/v1/audit?limit=0", token=dm.admin), 400)


if __name__ == "__main__":
    dm = Daemon()
    try:
        setup()
        fx.run([test_token_lifecycle, test_token_expires, test_tenant_admin_manages_its_subtree_only,
                test_token_scope_checked, test_last_admin_token_kept,
                test_authorization_matrix, test_two_authorization_headers,
                test_metrics_auth,
                test_jobs_are_scoped_to_tenants, test_refusals_audited_within_a_budget,
                test_audit_log, test_tenant_admin_token_cap])
    finally:
        dm.stop()
