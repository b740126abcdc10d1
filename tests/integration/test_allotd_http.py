"""The HTTP layer of allotd: routing (404, 405), bearer tokens (401),
body limits (413), JSON errors for malformed JSON, wrong types and
unknown fields (400, naming the field), /healthz, /readyz and /metrics
in the Prometheus text format; a thread per connection (a long poll holds
up no other connection; with one shared thread it does) and the
connection limit."""

import http.client
import json
import re
import socket
import time

import allotd_fixture as fx
from allotd_fixture import TENANTS, Daemon, expect

dm = None


def test_health_and_routing():
    assert expect(dm.req("GET", "/healthz"), 200) == {"status": "ok"}
    assert expect(dm.req("GET", "/readyz"), 200) == {"status": "ready"}
    b = expect(dm.req("GET", "/v1/nope", token=dm.admin), 404)
    assert b["error"]["code"] == "not_found"
    expect(dm.req("DELETE", "/v1/jobs", token=dm.admin), 405)
    expect(dm.req("GET", "/v1/jobs/../tokens", token=dm.admin), 404)
    # a 405 says which methods the path takes (Allow), as HTTP asks
    c = dm.conn()
    c.request("DELETE", "/v1/jobs", headers={"Authorization": "Bearer " + dm.admin})
    r = c.getresponse()
    assert r.status == 405 and r.getheader("Allow") == "POST, GET", r.getheaders()
    assert "allowed: POST, GET" in r.read().decode()
    # HEAD, as load balancers' health checks send it: a GET without a body
    for path in ("/healthz", "/readyz"):
        c = dm.conn()
        c.request("HEAD", path)
        r = c.getresponse()
        assert r.status == 200 and r.read() == b"", (path, r.status)


def test_401_without_or_with_a_bad_token():
    expect(dm.req("GET", "/v1/jobs"), 401)
    expect(dm.req("GET", "/v1/jobs", token="allot_" + "0" * 64), 401)
    expect(dm.req("GET", "/v1/jobs", headers={"Authorization": "Basic Zm9vOmJhcg=="}), 401)
    expect(dm.req("GET", "/v1/jobs", headers={"Authorization": "Bearer"}), 401)
    # the scheme's case does not matter
    expect(dm.req("GET", "/v1/jobs", headers={"Authorization": "bearer " + dm.admin}), 200)
    expect(dm.req("POST", "/v1/jobs", {"tenant": "x"}), 401)


def test_413_over_one_mib():
    big = b'{"tenant":"' + b"x" * (2 << 20) + b'"}'
    b = expect(dm.req("POST", "/v1/jobs", big, token=dm.admin), 413)
    assert b["error"]["code"] == "too_large"
    # chunked, without a Content-Length
    c = dm.conn()
    c.putrequest("POST", "/v1/jobs")
    c.putheader("Authorization", "Bearer " + dm.admin)
    c.putheader("Transfer-Encoding", "chunked")
    c.endheaders()
    chunk = b"x" * 65536
    try:
        for _ in range(20):
            c.send(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        c.send(b"0\r\n\r\n")
        r = c.getresponse()
        assert r.status == 413, r.status
        r.read()
    finally:
        c.close()
    # a huge declared body is refused on its headers, before any of it is sent
    s = socket.create_connection(("127.0.0.1", dm.port), timeout=5)
    try:
        s.sendall(b"POST /v1/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
                  b"Content-Length: 1073741824\r\n\r\n" % dm.admin.encode())
        head = s.recv(4096)
        assert head.startswith(b"HTTP/1.1 413"), head
    finally:
        s.close()
    # just under the limit is parsed (and refused for what it says)
    ok = b'{"tenant":"' + b"x" * ((1 << 20) - 100) + b'"}'
    expect(dm.req("POST", "/v1/jobs", ok, token=dm.admin), 422)


def test_400_malformed_wrong_types_unknown_fields():
    for body in ['{"tenant":', "[1,2]", "", "nul", '{"a":1,"a":2}', b'{"name":"\xff"}']:
        expect(dm.req("POST", "/v1/jobs", body, token=dm.admin), 400, repr(body))
    b = expect(dm.req("POST", "/v1/jobs", {"tenant": "a", "gpus": "2"}, token=dm.admin), 400)
    assert '"gpus"' in b["error"]["message"], b
    b = expect(dm.req("POST", "/v1/jobs", {"tenant": "a", "gpuz": 2}, token=dm.admin), 400)
    assert '"gpuz"' in b["error"]["message"], b
    b = expect(dm.req("POST", "/v1/tokens", {"role": "viewer", "colour": "red"},
                      token=dm.admin), 400)
    assert '"colour"' in b["error"]["message"], b
    # one code for a bad field whatever the route: unknown, or of the wrong type
    assert b["error"]["code"] == "bad_request", b
    b = expect(dm.req("POST", "/v1/tokens", {"role": 7}, token=dm.admin), 400)
    assert b["error"]["code"] == "bad_request", b
    b = expect(dm.req("POST", "/v1/jobs/1/signal", {"signal": "USR1", "x": 1}, token=dm.admin),
               400)
    assert b["error"]["code"] == "bad_request", b
    b = expect(dm.req("PUT", "/v1/tenants", {"tenants": [{"path": "a", "wieght": 2}]},
                      token=dm.admin), 400)
    assert "wieght" in b["error"]["message"], b
    expect(dm.req("GET", "/v1/jobs?limit=abc", token=dm.admin), 400)
    b = expect(dm.req("GET", "/v1/jobs?state=completed", token=dm.admin), 400)
    assert 'unknown state "completed" (one of pending, ' in b["error"]["message"], b
    assert "succeeded" in b["error"]["message"], b  # the name Slurm users look for


def test_slow_client_does_not_block_others():
    s = socket.create_connection(("127.0.0.1", dm.port), timeout=5)
    try:
        s.sendall(b"POST /v1/jobs HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")
        expect(dm.req("GET", "/healthz"), 200)
    finally:
        s.close()


def _long_poll_blocks(d):
    """Seconds a /healthz on another open connection takes while an agent's
    heartbeat long-polls (2 s) on its own."""
    ag = d.token("agent", "", "agents")
    node = {"name": "lp-1", "cpus": 4, "memory": 4096, "gpus": []}
    expect(d.req("POST", "/v1/nodes/register", node, token=ag), 201)
    version = expect(d.req("POST", "/v1/nodes/lp-1/heartbeat", {}, token=ag), 200)["version"]
    other = d.conn()  # open before the poll starts
    other.connect()
    poll = socket.create_connection(("127.0.0.1", d.port), timeout=10)
    try:
        body = json.dumps({"known": version, "wait_ms": 2000}).encode()
        poll.sendall(b"POST /v1/nodes/lp-1/heartbeat HTTP/1.1\r\nHost: x\r\n"
                     b"Authorization: Bearer " + ag.encode() + b"\r\n"
                     b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" %
                     len(body) + body)
        time.sleep(0.3)  # the poll is waiting now
        t0 = time.time()
        other.request("GET", "/healthz")
        assert other.getresponse().status == 200
        took = time.time() - t0
        assert b"200" in poll.recv(4096)  # the poll itself is answered when it ends
        return took
    finally:
        poll.close()
        other.close()


def test_waiting_request_holds_up_no_other_connection():
    # a thread per connection (the default): answered at once
    took = _long_poll_blocks(dm)
    assert took < 1.0, took
    # one shared thread: the same request waits for the poll
    one = Daemon(args=["--workers", "1"])
    try:
        took = _long_poll_blocks(one)
        assert took > 1.0, took
    finally:
        assert one.stop() == 0


def _hold_half_request(d):
    """A connection that sent half a request and that the server holds open.
    A connection just finished (the fixture's readiness probe) may still
    count until the server reaps it; then the new one is closed at once and
    is opened again, bounded in time."""
    end = time.time() + 5
    while time.time() < end:
        s = socket.create_connection(("127.0.0.1", d.port), timeout=5)
        s.sendall(b"GET /healthz HTTP/1.1\r\n")
        s.settimeout(1.0)  # a refused one is closed at once, even on a loaded machine
        try:
            closed = s.recv(1) == b""
        except socket.timeout:
            s.settimeout(5)
            return s
        except OSError:
            closed = True
        assert closed  # a half request is never answered
        s.close()
        time.sleep(0.05)
    raise AssertionError("the server held no connection open in 5 s")


def test_max_connections():
    d = Daemon(args=["--max-connections", "4"])
    held = []
    try:
        for _ in range(4):  # four connections that sent half a request
            held.append(_hold_half_request(d))
        st = 200
        end = time.time() + 5
        while time.time() < end and st is not None:  # bounded: until the four are accepted
            try:
                st, _ = d.req("GET", "/healthz")
                time.sleep(0.05)
            except (ConnectionError, http.client.HTTPException, OSError):
                st = None
        assert st is None, st  # the fifth is closed as it arrives
        held.pop().close()
        end = time.time() + 5
        st = None
        while time.time() < end and st != 200:  # bounded: the slot frees at once
            try:
                st, _ = d.req("GET", "/healthz")
            except (ConnectionError, http.client.HTTPException, OSError):
                time.sleep(0.05)
        assert st == 200, st
    finally:
        for s in held:
            s.close()
        assert d.stop() == 0


def _status_from(d, src):
    """GET /healthz from source address src; None when the connection is closed."""
    try:
        s = socket.create_connection(("127.0.0.1", d.port), timeout=5, source_address=(src, 0))
        try:
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            line = s.makefile("rb").readline()
        finally:
            s.close()
        return int(line.split()[1]) if line else None
    except OSError:
        return None


def test_max_connections_per_ip():
    """One client address holding its share of connections (slowly sent requests) leaves
    the others served (--max-connections-per-ip)."""
    d = Daemon(args=["--max-connections", "16", "--max-connections-per-ip", "3"])
    held = []
    try:
        for _ in range(3):
            held.append(_hold_half_request(d))
        end = time.time() + 5
        st = 200
        while time.time() < end and st is not None:  # bounded: until the three count
            st = _status_from(d, "127.0.0.1")
            time.sleep(0.05)
        assert st is None, st  # a fourth from the same address is closed
        assert _status_from(d, "127.0.0.2") == 200  # another address is served
    finally:
        for s in held:
            s.close()
        assert d.stop() == 0


def test_open_connections_hold_no_store_handle():
    """A store read handle is lent to a request, not to a connection: 40
    keep-alive connections that each made a request hold none between
    requests, and the idle ones are reused."""
    def handles():
        st, text = dm.req("GET", "/metrics", raw=True)
        return {m.group(1): int(m.group(2)) for m in
                re.finditer(r'^allot_store_read_handles\{state="(\w+)"\} (\d+)$', text, re.M)}
    before = handles()
    conns = []
    try:
        for _ in range(40):
            c = dm.conn()
            c.request("GET", "/v1/jobs", headers={"Authorization": "Bearer " + dm.admin})
            r = c.getresponse()
            assert r.status == 200
            r.read()
            conns.append(c)  # kept open
        after = handles()
        # the loop's and the metering thread's own, and the /metrics request's
        assert after["lent"] <= before["lent"] + 1, (before, after)
        assert after["lent"] + after["idle"] <= before["lent"] + before["idle"] + 2, (before, after)
    finally:
        for c in conns:
            c.close()


def test_dashboard_not_installed():
    """An allotd whose --ui-dir is not there says so at start, and /ui/ answers a 404 that
    names the folder and the option, not a missing file."""
    d = Daemon(args=["--ui-dir", "/nonexistent/allot-web"])
    try:
        st, b = d.req("GET", "/ui/")
        assert st == 404 and "not installed" in b["error"]["message"], (st, b)
        assert "/nonexistent" not in b["error"]["message"], b  # the path is for the log
        assert "dashboard's files are not at /nonexistent/allot-web" in d.log(), d.log()
    finally:
        d.stop()


def test_metrics():
    # the dashboard's files and its redirect count under their own route, not
    # as unmatched requests or (a 308) as server errors
    assert dm.req("GET", "/ui")[0] == 308
    dm.req("GET", "/ui/")
    assert dm.req("GET", "/no/such/route")[0] == 404
    st, text = dm.req("GET", "/metrics", raw=True)
    # a request no route matches: method "other" (never an empty label)
    assert 'allot_api_requests_total{method="other",route="unmatched",code="404"}' in text, text
    assert 'method=""' not in text, text
    assert st == 200
    assert 'allot_api_requests_total{method="GET",route="/ui/",code="308"} 1' in text, text
    assert re.search(r'allot_api_requests_total\{method="GET",route="/ui/",code="(200|404)"\}',
                     text), text
    assert 'route="unmatched",code="500"' not in text, text
    assert "# TYPE allot_api_requests_total counter" in text
    assert "# TYPE allot_api_request_seconds histogram" in text
    assert re.search(r'allot_api_requests_total\{method="GET",route="/healthz",code="200"\} \d+',
                     text), text
    assert re.search(r'allot_api_requests_total\{method="POST",route="/v1/jobs",code="400"\} \d+',
                     text), text
    assert 'allot_api_request_seconds_bucket{method="GET",route="/healthz",code="200",le="+Inf"}' \
        in text
    assert "allot_sched_cycle_seconds_count" in text
    # every sample line is NAME{labels} VALUE or NAME VALUE
    for line in text.splitlines():
        if line and not line.startswith("#"):
            assert re.match(r'^[a-z_]+(\{.*\})? [0-9.e+-]+$', line), line


def test_tenant_jobs_at_zero_and_request_log():
    """allot_tenant_jobs shows every leaf at 0 too (no series vanishes when a tenant's
    last job ends), and a debug request log line says who asked and how long it took."""
    d = Daemon(args=["--log-level", "debug"])
    try:
        expect(d.req("PUT", "/v1/tenants", TENANTS, token=d.admin), 200)
        end = time.time() + 10  # bounded: the loop reads the new tree at its next cycle
        while True:
            st, text = d.req("GET", "/metrics", raw=True)
            if st != 200 or 'tenant="research/nlp"' in text or time.time() > end:
                break
            time.sleep(0.05)
        assert st == 200
        for s in ("pending", "running"):
            assert 'allot_tenant_jobs{tenant="research/nlp",state="%s"} 0' % s in text, text
        assert 'allot_tenant_jobs{tenant="research",' not in text, text  # not a leaf
        assert re.search(r"127\.0\.0\.1 PUT /v1/tenants -> 200 in [0-9.]+ ms", d.log()), \
            d.log()[-2000:]
    finally:
        assert d.stop() == 0


def test_rate_limit_429():
    rl = Daemon(args=["--rate-limit", "1", "--rate-burst", "3"])

    def get(tok):
        c = rl.conn()
        try:
            c.request("GET", "/v1/tenants", headers={"Authorization": "Bearer " + tok})
            r = c.getresponse()
            return r.status, r.getheader("Retry-After"), r.read()
        finally:
            c.close()

    try:
        other = rl.token("viewer", "", "other")  # one request of the admin's burst
        got = []
        for _ in range(10):  # bounded: the burst is 3, refills 1/s
            got.append(get(rl.admin))
            if got[-1][0] == 429:
                break
        assert [g[0] for g in got[:2]] == [200, 200], got
        st, retry, body = got[-1]
        assert st == 429 and retry == "1" and b'"rate_limited"' in body, got
        # other tokens and the public routes are not affected
        expect(rl.req("GET", "/v1/tenants", token=other), 200)
        expect(rl.req("GET", "/healthz"), 200)
        time.sleep(1.1)
        expect(rl.req("GET", "/v1/tenants", token=rl.admin), 200)
    finally:
        assert rl.stop() == 0


if __name__ == "__main__":
    dm = Daemon()
    try:
        fx.run([test_health_and_routing, test_401_without_or_with_a_bad_token,
                test_413_over_one_mib, test_400_malformed_wrong_types_unknown_fields,
                test_slow_client_does_not_block_others,
                test_waiting_request_holds_up_no_other_connection, test_max_connections, test_max_connections_per_ip,
                test_open_connections_hold_no_store_handle,
                test_metrics, test_tenant_jobs_at_zero_and_request_log, test_rate_limit_429,
                test_dashboard_not_installed])
    finally:
        dm.stop()
