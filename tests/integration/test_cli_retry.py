"""`allot submit` retries without making a second job: through a relay
that drops the reply of the first submission (the job was created, the
client never heard), that closes the first connections unread, and
against a port where nothing listens yet; cancel and token creation are
not repeated after a lost reply; a server that never answers ends with
exit status 5 after the bounded retries; 503 while starting and 429 over
a rate limit are waited for."""

import socket
import threading
import time

import allotd_fixture as fx
from allotd_fixture import TENANTS, Daemon, expect
from cli_fixture import Proxy, cli, fails, ok

dm = None


def jobs_named(name):
    st, b = dm.req("GET", "/v1/jobs?limit=1000", token=dm.admin)
    assert st == 200 and not b["next_cursor"]
    return [j for j in b["jobs"] if j["name"] == name]


def test_lost_reply_makes_one_job():
    p = Proxy(dm.port, mode="drop", bad=1)
    try:
        r = ok(cli(dm, "submit", "-t", "research/nlp", "-n", "lost-reply", "--", "true",
                   server="http://127.0.0.1:%d" % p.port))
        assert p.forwarded == 1 and p.conns >= 2, (p.forwarded, p.conns)
        assert "retrying" in r.err and "already submitted" in r.err, r
        js = jobs_named("lost-reply")
        assert [j["id"] for j in js] == [int(r.out)], js
    finally:
        p.stop()


def test_lost_replies_with_own_key():
    p = Proxy(dm.port, mode="drop", bad=2)
    try:
        r = ok(cli(dm, "submit", "-t", "research/nlp", "-n", "own-key", "--idempotency-key",
                   "retry-key-1", "--", "true", server="http://127.0.0.1:%d" % p.port))
        assert p.forwarded == 2, p.forwarded
        assert [j["id"] for j in jobs_named("own-key")] == [int(r.out)]
    finally:
        p.stop()


def test_closed_connections_then_ok():
    p = Proxy(dm.port, mode="close", bad=2)
    try:
        r = ok(cli(dm, "submit", "-t", "research/nlp", "-n", "closed-first", "--", "true",
                   server="http://127.0.0.1:%d" % p.port))
        assert p.conns >= 3, p.conns
        assert [j["id"] for j in jobs_named("closed-first")] == [int(r.out)]
    finally:
        p.stop()


def test_server_comes_up_late():
    # a port nobody listens on yet; a relay opens it while allot retries
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    holder = {}

    def start_later():
        time.sleep(0.6)
        holder["p"] = Proxy(dm.port, mode="close", bad=0, port=port)

    t = threading.Thread(target=start_later, daemon=True)
    t.start()
    try:
        r = ok(cli(dm, "submit", "-t", "research/nlp", "-n", "late-server", "--", "true",
                   server="127.0.0.1:%d" % port))
        assert "retrying" in r.err, r
        assert [j["id"] for j in jobs_named("late-server")] == [int(r.out)]
    finally:
        t.join(timeout=5)
        if "p" in holder:
            holder["p"].stop()


def test_no_server_gives_up():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    t0 = time.time()
    r = fails(cli(dm, "submit", "-t", "research/nlp", "-n", "never", "--retries", "2", "--", "true",
                  server="127.0.0.1:%d" % port), 5, "connection")
    assert time.time() - t0 < 10 and r.err.count("retrying") == 2, r
    assert jobs_named("never") == []
    fails(cli(dm, "ls", "--retries", "0", server="127.0.0.1:%d" % port), 5, "connection")
    # followers wait out an outage of an allotd that answered them, not one that never
    # did (a wrong --server): they give up after their retries as any verb
    for verb in (["logs", "-f", "1"], ["events", "-w", "1"]):
        t0 = time.time()
        r = fails(cli(dm, *verb, "--retries", "1", server="127.0.0.1:%d" % port), 5,
                  "connection")
        assert time.time() - t0 < 10 and "does not answer" not in r.err, r


def test_silent_server_first():
    """With several --server URLs, one that takes connections and answers nothing (a frozen
    allotd, or one cut off from its store) is left for the next after --timeout, for
    requests that may be sent again (a listing, a submission with its key); one that may
    not (a cancel) is not sent to another."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(16)  # never accepted: the kernel completes connections, nobody answers
    try:
        both = "http://127.0.0.1:%d,http://127.0.0.1:%d" % (s.getsockname()[1], dm.port)
        t0 = time.time()
        r = ok(cli(dm, "ls", "-o", "json", "--timeout", "2s", "--retries", "0", server=both))
        assert time.time() - t0 < 10, r
        r = ok(cli(dm, "submit", "-t", "research/nlp", "-n", "past-silent", "--timeout", "2s",
                   "--retries", "0", "--", "true", server=both))
        assert [j["id"] for j in jobs_named("past-silent")] == [int(r.out)]
        fails(cli(dm, "cancel", r.out.strip(), "--timeout", "2s", "--retries", "0", server=both), 5,
              "connection")
        assert [j["state"] for j in jobs_named("past-silent")] == ["pending"]
    finally:
        s.close()


def test_not_repeated_when_unsafe():
    jid = int(ok(cli(dm, "submit", "-t", "research/nlp", "-n", "to-cancel", "--", "true")).out)
    p = Proxy(dm.port, mode="drop", bad=1)
    try:
        # the cancel went through but its reply was lost: no second attempt
        fails(cli(dm, "cancel", jid, server="http://127.0.0.1:%d" % p.port), 5, "connection")
        assert p.conns == 1 and p.forwarded == 1, (p.conns, p.forwarded)
    finally:
        p.stop()
    st, j = dm.req("GET", "/v1/jobs/%d" % jid, token=dm.admin)
    assert j["state"] == "cancelled"
    p = Proxy(dm.port, mode="drop", bad=1)
    try:
        st, before = dm.req("GET", "/v1/tokens", token=dm.admin)
        fails(cli(dm, "tokens", "create", "--role", "viewer",
                  server="http://127.0.0.1:%d" % p.port), 5, "connection")
        assert p.conns == 1
        st, after = dm.req("GET", "/v1/tokens", token=dm.admin)
        assert len(after["tokens"]) == len(before["tokens"]) + 1
    finally:
        p.stop()


def test_starting_server_is_waited_for():
    # 503 while allotd rebuilds its state: retried until ready
    d = Daemon(args=["--debug-ready-delay", "1s"], ready=False)
    try:
        expect(d.req("GET", "/v1/jobs", token=d.admin), 503)
        r = ok(cli(d, "tokens", "ls", "-o", "json"))
        assert "retrying" not in r.err  # 503 retries are quiet unless -v
        assert len(r.json()) == 1, r
        fails(cli(d, "ls", token="allot_" + "2" * 64), 3, "unauthorized")
    finally:
        assert d.stop() == 0


def test_rate_limited_waits():
    # one request per second per token: `top` makes four requests in a row,
    # so it meets 429s and waits their Retry-After instead of failing
    d = Daemon(args=["--rate-limit", "1", "--rate-burst", "1"])
    try:
        r = ok(cli(d, "top", "-o", "json", "-v"))
        assert r.json()["jobs"] == {"running": 0, "starting": 0, "pending": 0}, r
        assert "rate limited" in r.err, r
        for _ in range(2):
            assert len(ok(cli(d, "tokens", "ls", "-o", "json")).json()) == 1
        fails(cli(d, "top", "--retries", "0"), 5, "rate_limited")
    finally:
        assert d.stop() == 0


if __name__ == "__main__":
    dm = Daemon()
    try:
        expect(dm.req("PUT", "/v1/tenants", TENANTS, token=dm.admin), 200)
        fx.run([test_lost_reply_makes_one_job, test_lost_replies_with_own_key,
                test_closed_connections_then_ok, test_server_comes_up_late,
                test_no_server_gives_up, test_silent_server_first, test_not_repeated_when_unsafe,
                test_starting_server_is_waited_for, test_rate_limited_waits])
    finally:
        assert dm.stop() == 0
