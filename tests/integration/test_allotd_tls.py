"""HTTPS in allotd: with --tls-cert and --tls-key the API is served over
TLS only (a client trusting the certificate talks to it; plain HTTP gets
no answer), and bad TLS options are refused at start. Needs the openssl
command to make a throw-away certificate; skipped (passing) without it."""

import http.client
import os
import shutil
import ssl
import subprocess

import allotd_fixture as fx
from allotd_fixture import ALLOTD, Daemon


def test_https():
    if not shutil.which("openssl"):
        print("skip: no openssl command")
        return
    d = fx.tempdir()
    cert, key = os.path.join(d, "cert.pem"), os.path.join(d, "key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key,
                    "-out", cert, "-days", "2", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True, timeout=30)
    dm = Daemon(args=["--tls-cert", cert, "--tls-key", key], ready=False)
    try:
        ctx = ssl.create_default_context(cafile=cert)
        ok = False
        for _ in range(100):  # bounded wait for readiness, over HTTPS
            c = http.client.HTTPSConnection("127.0.0.1", dm.port, timeout=5, context=ctx)
            c.request("GET", "/readyz")
            r = c.getresponse()
            r.read()
            c.close()
            if r.status == 200:
                ok = True
                break
            import time
            time.sleep(0.05)
        assert ok, "not ready over HTTPS"
        c = http.client.HTTPSConnection("127.0.0.1", dm.port, timeout=5, context=ctx)
        c.request("GET", "/v1/tenants", headers={"Authorization": "Bearer " + dm.admin})
        r = c.getresponse()
        assert r.status == 200, r.status
        r.read()
        c.close()
        plain = http.client.HTTPConnection("127.0.0.1", dm.port, timeout=5)
        try:
            plain.request("GET", "/healthz")
            st = plain.getresponse().status
        except (OSError, http.client.HTTPException):
            st = None
        assert st != 200, "plain HTTP answered on the TLS port"
    finally:
        assert dm.stop() == 0
    # refused at start: one of the pair, or a file that is not there
    r = subprocess.run([ALLOTD, "--data-dir", d, "--listen", "127.0.0.1:0", "--tls-cert", cert],
                       capture_output=True, text=True, timeout=10)
    assert r.returncode == 2 and "go together" in r.stderr, r
    r = subprocess.run([ALLOTD, "--data-dir", dm.dir, "--listen", "127.0.0.1:0", "--tls-cert",
                        cert, "--tls-key", os.path.join(d, "missing.pem")],
                       capture_output=True, text=True, timeout=10)
    assert r.returncode == 1 and "missing.pem" in r.stderr, r


if __name__ == "__main__":
    fx.run([test_https])
