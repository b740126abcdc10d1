#!/usr/bin/env python3
"""Several allotd on one PostgreSQL store (docs/ha.md), against a throwaway
server on loopback (scripts/pg_sandbox.py; stopped by pid at the end).

- allotd on PostgreSQL: `init --store`, jobs and tenants across a restart.
- One leads, the other stands by: it serves the reads of the store (jobs,
  audit, tenants, tokens) and checks every token in the store (a revocation
  on the leader counts at once); /readyz and every other route answer 503
  "standby" naming the leader; the CLI given the standby's URL follows it.
- The leader is killed (SIGKILL): the standby takes the lead within a few
  lead checks, with everything the leader committed, and the CLI given both
  URLs (the dead one first) reaches it. An agent given both URLs carries on
  heartbeating with the new leader, and a job running on it when the leader
  died runs on and ends succeeded, once.
- The leader's store session is ended from the database side (a network
  cut): the standby takes over; until the old leader's next check its
  writes are fenced (503 "standby", nothing stored); then it says so and
  exits with status 3. A password in the store URL is never logged.
- --store-readers bounds the database connections of an allotd under 16
  concurrent readers.
- Two allotd on one SQLite file: the second stands by until the first stops.
"""

import os
import signal
import subprocess
import sys
import time

import allotd_fixture as fx
import cli_fixture as cf
import pg_sandbox  # scripts/, on the path through allotd_fixture

fx.remove_stale_cgroups()
PG = pg_sandbox.Server()
DBS = [0]
LEAD_CHECK = ["--lead-check", "200ms"]


def new_store():
    """A fresh database and its admin token from `allotd init --store`."""
    DBS[0] += 1
    url = PG.createdb("allot_ha_%d" % DBS[0])
    r = subprocess.run([fx.ALLOTD, "init", "--store", url], capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 0, r.stderr
    return url, r.stdout.strip()


def daemon(url, admin, ready=True):
    d = fx.Daemon(data_dir=fx.tempdir(), args=["--store", url] + LEAD_CHECK, ready=ready)
    d.admin = admin
    return d


def base(d):
    return "http://127.0.0.1:%d" % d.port


def wait_status(d, path, status, timeout=10):
    end = time.time() + timeout
    while time.time() < end:
        st, body = d.req("GET", path)
        if st == status:
            return body
        time.sleep(0.05)
    raise AssertionError("%s: %s not %d within %ss: %r" % (base(d), path, status, timeout, body))


def submit(d, name):
    return fx.expect(d.req("POST", "/v1/jobs", {"name": name, "tenant": "research/nlp",
                                                "gpus": 1, "command": ["true"]},
                           token=d.admin), 201)


def test_postgres_store_survives_restart():
    url, admin = new_store()
    r = subprocess.run([fx.ALLOTD, "init", "--store", url], capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 1 and "already initialised" in r.stderr, r.stderr
    d = daemon(url, admin)
    fx.expect(d.req("PUT", "/v1/tenants", fx.TENANTS, token=admin), 200)
    j = submit(d, "kept")
    assert d.stop() == 0
    # a password in the URL (the server trusts loopback and ignores it) is never logged
    host, db = url.split("@", 1)[1].split("/", 1)
    d2 = daemon("postgres://allot:hunter2@%s/%s?password=zz9top&application_name=ha" % (host, db),
                admin)
    assert "hunter2" not in d2.log() and "zz9top" not in d2.log(), d2.log()
    assert "allot:***@" in d2.log() and "password=***" in d2.log(), d2.log()
    got = fx.job(d2, j["id"])
    assert got["name"] == "kept" and got["state"] == "pending", got
    tenants = fx.expect(d2.req("GET", "/v1/tenants", token=admin), 200)
    assert len(tenants["tenants"]) == len(fx.TENANTS["tenants"]), tenants
    # the audit chain, written by two processes in turn, verifies
    audit = fx.expect(d2.req("GET", "/v1/audit/verify", token=admin), 200)
    assert audit.get("ok") is True, audit
    assert d2.stop() == 0
    # a database that is not there, and one that is not SQL_ASCII
    r = subprocess.run([fx.ALLOTD, "--store", PG.url + "/nosuch", "--listen", "127.0.0.1:0"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 1 and "nosuch" in r.stderr, r.stderr
    PG.sql("CREATE DATABASE allot_utf8 TEMPLATE template0 ENCODING 'UTF8'")
    r = subprocess.run([fx.ALLOTD, "init", "--store", PG.url + "/allot_utf8"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 1 and "SQL_ASCII" in r.stderr, r.stderr


def test_standby_then_takeover():
    url, admin = new_store()
    a = daemon(url, admin)
    fx.expect(a.req("PUT", "/v1/tenants", fx.TENANTS, token=admin), 200)
    j = submit(a, "before")
    b = daemon(url, admin, ready=False)
    body = wait_status(b, "/readyz", 503)
    # wait until the standby has read who leads
    end = time.time() + 10
    while body.get("leader") != base(a) and time.time() < end:
        time.sleep(0.05)
        body = b.req("GET", "/readyz")[1]
    assert body["error"]["code"] == "standby" and body["leader"] == base(a), body
    # the standby serves reads of the store itself; anything else goes to the leader
    assert fx.job(b, j["id"])["name"] == "before"
    listed = fx.expect(b.req("GET", "/v1/jobs", token=admin), 200)
    assert [x["id"] for x in listed["jobs"]] == [j["id"]], listed
    assert fx.expect(b.req("GET", "/v1/audit/verify", token=admin), 200)["ok"] is True
    st, body = b.req("POST", "/v1/jobs", {"name": "x", "tenant": "research/nlp",
                                          "command": ["true"]}, token=admin)
    assert st == 503 and body["error"]["code"] == "standby", (st, body)
    st, body = b.req("GET", "/v1/nodes", token=admin)
    assert st == 503 and body["error"]["code"] == "standby", (st, body)
    # a token the leader revokes is refused by the standby at once
    viewer = a.token("viewer", name="v")
    fx.expect(b.req("GET", "/v1/jobs", token=viewer), 200)
    tid = fx.expect(a.req("GET", "/v1/whoami", token=viewer), 200)["token_id"]
    fx.expect(a.req("DELETE", "/v1/tokens/%d" % tid, token=admin), 200)
    fx.expect(b.req("GET", "/v1/jobs", token=viewer), 401)
    # the CLI given the standby: its reads there, its writes at the leader it names
    r = cf.ok(cf.cli(b, "show", j["id"], "-o", "json", token=admin))
    assert r.json()["name"] == "before", r
    r = cf.ok(cf.cli(b, "cancel", j["id"], token=admin))
    assert fx.job(a, j["id"])["state"] == "cancelled"
    assert "leading (epoch" in a.log() and "standing by" in b.log(), b.log()
    # /metrics says who leads (and a standby serves it: no group committer there)
    st, text = a.req("GET", "/metrics", raw=True)
    assert st == 200 and "\nallot_leader 1\n" in text and "\nallot_leader_epoch 1\n" in text
    st, text = b.req("GET", "/metrics", raw=True)
    assert st == 200 and "\nallot_leader 0\n" in text and "\nallot_leader_epoch 0\n" in text

    # the leader dies: the standby takes over with what was committed
    a.stop(sig=signal.SIGKILL)
    t0 = time.time()
    wait_status(b, "/readyz", 200, timeout=15)
    took = time.time() - t0
    assert fx.job(b, j["id"])["state"] == "cancelled"
    k = submit(b, "after")
    assert k["id"] > j["id"], k
    assert "leading (epoch 2)" in b.log(), b.log()
    st, text = b.req("GET", "/metrics", raw=True)
    assert "\nallot_leader 1\n" in text and "\nallot_leader_epoch 2\n" in text, text[-500:]
    print("takeover in %.2fs" % took)
    # the CLI given both URLs, the dead one first, reaches the new leader
    r = cf.ok(cf.cli(b, "show", k["id"], "-o", "json", token=admin,
                     server="%s,%s" % (base(a), base(b))))
    assert r.json()["name"] == "after", r
    # the old leader comes back as a standby naming the new one
    a2 = fx.Daemon(data_dir=a.dir, args=["--store", url] + LEAD_CHECK, ready=False)
    a2.admin = admin
    end = time.time() + 10
    while time.time() < end:
        body = a2.req("GET", "/readyz")[1]
        if isinstance(body, dict) and body.get("leader") == base(b):
            break
        time.sleep(0.05)
    assert body.get("leader") == base(b), body
    assert a2.stop() == 0
    assert b.stop() == 0


def test_agent_follows_the_lead():
    if os.geteuid() != 0:
        print("SKIP: the agent part needs root (cgroups); the root CI run checks it")
        return
    url, admin = new_store()
    a = daemon(url, admin)
    b = daemon(url, admin, ready=False)
    wait_status(b, "/readyz", 503)
    tok = a.token("agent", name="agent")
    # the standby first: the agent goes to the leader it names
    ag = fx.Agent(a, tok, "ha-node", server="%s,%s" % (base(b), base(a)))

    def node_seen(d, after):
        end = time.time() + 15
        n = None
        while time.time() < end:
            st, body = d.req("GET", "/v1/nodes", token=admin)
            nodes = body.get("nodes", []) if st == 200 and isinstance(body, dict) else []
            n = next((x for x in nodes if x.get("name") == "ha-node"), None)
            if n and n.get("state") == "ready" and n.get("last_heartbeat", 0) >= after:
                return n
            time.sleep(0.1)
        raise AssertionError("ha-node not heard of on %s: %r" % (base(d), n))

    node_seen(a, 0)
    # a job running on the node when the leader dies runs on, and ends once
    fx.expect(a.req("PUT", "/v1/tenants", fx.TENANTS, token=admin), 200)
    j = fx.expect(a.req("POST", "/v1/jobs", {"name": "across", "tenant": "research/nlp",
                                             "gpus": 1, "cpus": 1, "memory": 256,
                                             "command": ["sh", "-c", "sleep 2; echo done"]},
                        token=admin), 201)
    fx.wait_job(a, j["id"], "running", timeout=15)
    a.stop(sig=signal.SIGKILL)
    wait_status(b, "/readyz", 200, timeout=15)
    node_seen(b, int(time.time()))
    got = fx.wait_job(b, j["id"], "succeeded", timeout=20)
    assert got.get("exit_code") == 0, got
    assert ag.task_log(j["id"]).strip() == "done", ag.task_log(j["id"])
    assert ag.stop() == 0
    assert b.stop() == 0


def test_lost_session_stops_the_leader():
    url, admin = new_store()
    # the leader checks its lead only every 5 s: meanwhile its writes are fenced
    a = fx.Daemon(data_dir=fx.tempdir(), args=["--store", url, "--lead-check", "5s"])
    a.admin = admin
    fx.expect(a.req("PUT", "/v1/tenants", fx.TENANTS, token=admin), 200)
    ag = a.token("agent", "", "agents")
    fx.expect(a.req("POST", "/v1/nodes/register", {"name": "cut-1", "cpus": 4, "memory": 4096,
                                                   "gpus": []}, token=ag), 201)
    b = daemon(url, admin, ready=False)
    wait_status(b, "/readyz", 503)
    # cut the leader's session to the store, as a network failure would: the one
    # holding the lead's advisory lock (key 0x616c6c7403: classid the high 32 bits),
    # right after one of its lead checks, so that the steps below have the 5 s
    # until the next one however slow the machine
    lock = ("FROM pg_locks WHERE locktype = 'advisory' AND granted AND classid = %d "
            "AND objid = %d AND database = (SELECT oid FROM pg_database WHERE datname = '%s')"
            % (0x616c6c7403 >> 32, 0x616c6c7403 & 0xffffffff, url.rsplit("/", 1)[1]))
    check = ("SELECT query_start FROM pg_stat_activity WHERE query = 'SELECT pg_backend_pid()' "
             "AND state = 'idle' AND pid = (SELECT pid %s)" % lock)
    seen = PG.sql(check)
    end = time.time() + 12
    while time.time() < end and PG.sql(check) in ("", seen):  # bounded: its next check
        time.sleep(0.02)
    ended = PG.sql("SELECT count(pg_terminate_backend(pid)) " + lock)
    assert ended == "1", ended
    wait_status(b, "/readyz", 200, timeout=15)
    # the old leader has not noticed yet: its write is refused whole, answered
    # as a standby would (the client retries elsewhere), and nothing is stored
    st, body = a.req("POST", "/v1/jobs", {"name": "late", "tenant": "research/nlp",
                                          "command": ["true"]}, token=admin)
    assert st == 503 and body["error"]["code"] == "standby", (st, body)
    assert body["leader"] == base(b), body  # the one that took over
    # nor does it renew a node's lease: only the leader may (its agent fences by it)
    st, body = a.req("POST", "/v1/nodes/cut-1/heartbeat", {}, token=ag)
    assert st == 503 and body["error"]["code"] == "standby", (st, body)
    assert "lease_expiry" not in body, body
    assert a.proc.poll() is None, "stopped before its lead check"
    listed = fx.expect(b.req("GET", "/v1/jobs", token=admin), 200)
    assert not [x for x in listed["jobs"] if x["name"] == "late"], listed
    assert "was fenced" in a.log(), a.log()
    rc = a.proc.wait(timeout=15)
    assert rc == 3, (rc, a.log()[-2000:])
    assert "lost the lead" in a.log(), a.log()
    assert b.stop() == 0


def test_frozen_leader_loses_the_lead():
    """A leader that freezes (SIGSTOP) keeps its store sessions open: PostgreSQL ends its
    lead session once it has been idle for ten lead checks (at least 10 s), so the
    standby takes over; the old leader, resumed, finds the lead gone and stops (exit 3)."""
    url, admin = new_store()
    a = daemon(url, admin)
    fx.expect(a.req("PUT", "/v1/tenants", fx.TENANTS, token=admin), 200)
    b = daemon(url, admin, ready=False)
    wait_status(b, "/readyz", 503)
    os.kill(a.proc.pid, signal.SIGSTOP)
    try:
        wait_status(b, "/readyz", 200, timeout=40)
        submit(b, "after-the-freeze")
    finally:
        os.kill(a.proc.pid, signal.SIGCONT)
    rc = a.proc.wait(timeout=15)
    assert rc == 3, (rc, a.log()[-2000:])
    listed = fx.expect(b.req("GET", "/v1/jobs", token=admin), 200)
    assert [x["name"] for x in listed["jobs"]] == ["after-the-freeze"], listed
    assert b.stop() == 0


def test_hung_store_is_not_ready():
    """The leader's lead checks stop answering (its store session's server process is
    stopped here, as a hung server or network would leave it): /readyz answers 503 once
    the lead was last confirmed five lead checks (at least 5 s) ago, so that a load
    balancer stops sending it traffic, and 200 again once the checks answer."""
    url, admin = new_store()
    a = daemon(url, admin)
    lock = ("FROM pg_locks WHERE locktype = 'advisory' AND granted AND classid = %d "
            "AND objid = %d AND database = (SELECT oid FROM pg_database WHERE datname = '%s')"
            % (0x616c6c7403 >> 32, 0x616c6c7403 & 0xffffffff, url.rsplit("/", 1)[1]))
    backend = int(PG.sql("SELECT pid " + lock))
    wait_status(a, "/readyz", 200)
    os.kill(backend, signal.SIGSTOP)
    try:
        body = wait_status(a, "/readyz", 503, timeout=20)
        assert body["error"]["code"] == "store" and "last confirmed" in \
            body["error"]["message"], body
    finally:
        os.kill(backend, signal.SIGCONT)
    wait_status(a, "/readyz", 200, timeout=20)
    assert a.stop() == 0


def test_read_handles_capped():
    """--store-readers bounds the connections an allotd opens to the database
    however many requests read at once; the others wait their turn."""
    import threading
    url, admin = new_store()
    d = fx.Daemon(data_dir=fx.tempdir(), args=["--store", url, "--store-readers", "4"])
    d.admin = admin
    for i in range(5):
        fx.expect(d.req("POST", "/v1/tokens", {"role": "viewer", "name": "v%d" % i},
                        token=admin), 201)
    db = url.rsplit("/", 1)[1]
    seen, errors = [], []

    def reader():
        for _ in range(10):
            st, body = d.req("GET", "/v1/tokens", token=admin)
            if st != 200:
                errors.append((st, body))
            seen.append(int(PG.sql("SELECT count(*) FROM pg_stat_activity WHERE datname = '%s'"
                                   % db)))

    threads = [threading.Thread(target=reader) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors[:3]
    assert len(seen) == 160, len(seen)
    # 4 read handles (the loop's and the metering's among them), the
    # committer's and the lead's: never more
    assert max(seen) <= 6, max(seen)
    assert d.stop() == 0


def test_two_on_one_sqlite_file():
    d = fx.tempdir()
    admin = fx.init(d)
    a = fx.Daemon(data_dir=d, args=LEAD_CHECK)
    a.admin = admin
    b = fx.Daemon(data_dir=d, args=LEAD_CHECK, ready=False)
    b.admin = admin
    body = wait_status(b, "/readyz", 503)
    assert body["error"]["code"] == "standby", body
    assert a.stop() == 0
    wait_status(b, "/readyz", 200, timeout=15)
    assert "leading (epoch 2)" in b.log(), b.log()
    assert b.stop() == 0


def test_unreadable_store_is_503():
    """A store that cannot be read to check a token answers 503 (retry), not 401: the
    token was not found bad, and a client that retries reaches an allotd that can read."""
    url, admin = new_store()
    a = daemon(url, admin)
    b = daemon(url, admin, ready=False)
    wait_status(b, "/readyz", 503)
    fx.expect(b.req("GET", "/v1/jobs", token=admin), 200)  # a standby reads the store
    db = url.rsplit("/", 1)[1]
    PG.sql("ALTER DATABASE %s ALLOW_CONNECTIONS false" % db)
    try:
        PG.sql("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
               "WHERE datname = '%s'" % db)
        st, body = b.req("GET", "/v1/jobs", token=admin)
        assert st == 503 and body["error"]["code"] == "store", (st, body)
    finally:
        PG.sql("ALTER DATABASE %s ALLOW_CONNECTIONS true" % db)
    a.stop()
    b.stop()


if __name__ == "__main__":
    try:
        fx.run([test_postgres_store_survives_restart, test_standby_then_takeover,
                test_agent_follows_the_lead, test_lost_session_stops_the_leader,
                test_frozen_leader_loses_the_lead, test_hung_store_is_not_ready,
                test_read_handles_capped, test_two_on_one_sqlite_file,
                test_unreadable_store_is_503])
    finally:
        PG.stop()
    sys.exit(0)
