"""allotd when its store fails: a full disk is logged once with the
store's own words (and /readyz names them, also while a heartbeat's small
write still fits), and writes work again once there is room and none
failed for 5 s; a database server that cannot be reached is not answered
with the hint for a new store."""

import os
import socket
import subprocess
import time

import allotd_fixture as fx
from allotd_fixture import Daemon, expect


def test_full_disk_is_named():
    mnt = fx.tempdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", mnt], check=True)
    d = None
    try:
        data = os.path.join(mnt, "db")
        admin = fx.init(data)
        d = Daemon(data_dir=data, log_dir=fx.tempdir())  # its log where there is room
        d.admin = admin
        expect(d.req("PUT", "/v1/tenants", fx.TENANTS, token=d.admin), 200)
        ag = d.token("agent", "", "agent-full")
        expect(d.req("POST", "/v1/nodes/register", {"name": "full-1", "cpus": 4,
                                                     "memory": 4096, "gpus": []}, token=ag), 201)
        fill = os.path.join(mnt, "fill")
        fd = os.open(fill, os.O_WRONLY | os.O_CREAT, 0o600)  # unbuffered: no late ENOSPC
        try:
            for _ in range(1000):  # bounded: the tmpfs is 3 MiB
                os.write(fd, b"\0" * 65536)
        except OSError:
            pass
        finally:
            os.close(fd)
        st = 0
        for i in range(200):  # bounded: a few writes fill what room is left
            st, b = d.req("POST", "/v1/jobs", {"tenant": "research/nlp", "cpus": 1,
                                               "name": "j%d" % i, "command": ["true"]},
                          token=d.admin)
            if st >= 500:
                break
        assert st >= 500, (st, b)
        st, b = d.req("GET", "/readyz")
        assert st == 503 and "full" in b["error"]["message"], (st, b)
        # a heartbeat's small write may still fit: the store is not working again
        for i in range(20):  # bounded
            d.req("POST", "/v1/nodes/full-1/heartbeat", {}, token=ag)
            d.req("POST", "/v1/jobs", {"tenant": "research/nlp", "cpus": 1, "name": "k%d" % i,
                                       "command": ["true"]}, token=d.admin)
            st, b = d.req("GET", "/readyz")
            assert st == 503, (i, st, b)
        os.unlink(fill)
        expect(d.req("POST", "/v1/jobs", {"tenant": "research/nlp", "cpus": 1, "name": "after",
                                          "command": ["true"]}, token=d.admin), 201)
        # ready again once writes have worked, none failing, for 5 s
        end = time.time() + 30
        while d.req("GET", "/readyz")[0] != 200:
            assert time.time() < end, "still not ready"
            d.req("POST", "/v1/nodes/full-1/heartbeat", {}, token=ag)
            time.sleep(0.2)
        log = d.log()
        assert log.count("store writes fail") == 1 and "full" in log, log[-3000:]
        assert log.count("store writes work again") == 1, log[-3000:]
    finally:
        if d:
            d.stop()
        subprocess.run(["umount", mnt], check=False)


def test_unreachable_database_server_hint():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    r = subprocess.run([fx.ALLOTD, "--store", "postgres://allot@127.0.0.1:%d/allot" % port,
                        "--listen", "127.0.0.1:0"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 1, r
    assert "cannot connect" in r.stderr and "database server is up" in r.stderr, r.stderr
    assert "allotd init" not in r.stderr, r.stderr


if __name__ == "__main__":
    fx.run([test_full_disk_is_named, test_unreachable_database_server_hint])
