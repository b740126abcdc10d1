"""Crash safety of allotd: a client submits jobs with Idempotency-Keys
while the daemon is killed with SIGKILL at random moments and restarted on
the same store. Every acknowledged job must exist exactly once afterwards,
retries of a key must never make a second job, and the audit chain must
verify. Bounded: a fixed number of submissions and kills."""

import os
import random
import signal
import threading
import time

import allotd_fixture as fx
from allotd_fixture import TENANTS, Daemon, expect

N_JOBS = 120
N_KILLS = 3


def test_sigkill_during_submissions():
    rng = random.Random(7)
    dm = Daemon()
    admin = dm.admin
    expect(dm.req("PUT", "/v1/tenants", TENANTS, token=admin), 200)
    state = {"dm": dm, "kills": 0}
    stop = threading.Event()

    def killer():
        while not stop.is_set() and state["kills"] < N_KILLS:
            time.sleep(rng.uniform(0.05, 0.4))
            p = state["dm"].proc
            if p.poll() is None:
                os.kill(p.pid, signal.SIGKILL)
                p.wait(timeout=10)
                state["kills"] += 1

    th = threading.Thread(target=killer)
    th.start()
    acked = {}
    try:
        deadline = time.time() + 25
        for i in range(N_JOBS):
            key = "key-%d" % i
            for attempt in range(50):
                assert time.time() < deadline, "out of time at job %d" % i
                d = state["dm"]
                if d.proc.poll() is not None:
                    d.err.close()
                    d = Daemon(d.dir)
                    d.admin = admin
                    state["dm"] = d
                try:
                    st, b = d.req("POST", "/v1/jobs", {"tenant": "research/nlp", "cpus": 1,
                                                       "name": key}, token=admin,
                                  headers={"Idempotency-Key": key})
                except (OSError, ConnectionError):
                    time.sleep(0.02)
                    continue
                if st in (200, 201):
                    assert key not in acked or acked[key] == b["id"], (key, acked.get(key), b)
                    acked[key] = b["id"]
                    # a retry after the acknowledgement returns the same job
                    if rng.random() < 0.2:
                        try:
                            st2, b2 = d.req("POST", "/v1/jobs",
                                            {"tenant": "research/nlp", "cpus": 1, "name": key},
                                            token=admin, headers={"Idempotency-Key": key})
                            if st2 in (200, 201):
                                assert b2["id"] == b["id"], (b, b2)
                        except (OSError, ConnectionError):
                            pass
                    break
                if st == 503:
                    time.sleep(0.02)
                    continue
                raise AssertionError("unexpected %d %r" % (st, b))
            else:
                raise AssertionError("job %d never acknowledged" % i)
    finally:
        stop.set()
        th.join(timeout=10)
    d = state["dm"]
    if d.proc.poll() is not None:
        d.err.close()
        d = Daemon(d.dir)
        d.admin = admin
    d.wait_ready(10)
    jobs = expect(d.req("GET", "/v1/jobs?limit=1000", token=admin), 200)["jobs"]
    by_key = {}
    for j in jobs:
        by_key.setdefault(j["idempotency_key"], []).append(j["id"])
    assert len(acked) == N_JOBS
    for key, jid in acked.items():
        assert by_key.get(key) == [jid], (key, jid, by_key.get(key))
    assert len(jobs) == N_JOBS, len(jobs)
    v = expect(d.req("GET", "/v1/audit/verify", token=admin), 200)
    assert v["ok"] is True, v
    assert state["kills"] >= 1
    assert d.stop() == 0


if __name__ == "__main__":
    fx.run([test_sigkill_during_submissions])
