"""A minimal W3C WebDriver client for the browser tests (standard library only).

Starts Debian's `chromedriver` on a free loopback port and drives a headless
`chromium` through it over HTTP/JSON: a temporary profile folder, no
sandbox (CI runs as root), the browser's console log collected through the
`goog:loggingPrefs` capability and read from `/session/{id}/se/log`. Every
process it starts is stopped by its pid; every wait is bounded.
"""

import base64
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request

CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


def available():
    """None when chromium and chromedriver are installed, else why not."""
    for p in (CHROMEDRIVER, CHROMIUM):
        if not os.access(p, os.X_OK):
            return "%s is not installed (Debian packages chromium, chromium-driver)" % p
    return None


def _free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class WebDriverError(Exception):
    pass


class Browser:
    """One chromedriver process and one browser session."""

    def __init__(self, width=1400, height=1000):
        self.dir = tempfile.mkdtemp(prefix="allot-browser-")
        self.port = _free_port()
        self.log_path = os.path.join(self.dir, "chromedriver.log")
        self._log = open(self.log_path, "w")
        self.proc = subprocess.Popen([CHROMEDRIVER, "--port=%d" % self.port,
                                      "--allowed-ips=127.0.0.1"],
                                     stdout=self._log, stderr=subprocess.STDOUT)
        self.base = "http://127.0.0.1:%d" % self.port
        self.session = None
        end = time.time() + 20
        while True:  # bounded: chromedriver answers /status within a second
            try:
                if self._call("GET", "/status").get("ready"):
                    break
            except (OSError, WebDriverError):
                pass
            if time.time() > end or self.proc.poll() is not None:
                self.close()
                raise WebDriverError("chromedriver did not start: " + self.driver_log())
            time.sleep(0.05)
        caps = {"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": CHROMIUM,
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu",
                         "--disable-dev-shm-usage", "--no-first-run",
                         "--no-default-browser-check", "--disable-extensions",
                         "--user-data-dir=" + os.path.join(self.dir, "profile"),
                         "--window-size=%d,%d" % (width, height)],
            },
            "goog:loggingPrefs": {"browser": "ALL"},
            "timeouts": {"script": 10000, "pageLoad": 20000, "implicit": 0},
        }}}
        try:
            self.session = self._call("POST", "/session", caps)["sessionId"]
        except Exception:
            self.close()
            raise

    def driver_log(self):
        try:
            with open(self.log_path, errors="replace") as f:
                return f.read()[-4000:]
        except OSError:
            return ""

    def _call(self, method, path, body=None, timeout=60):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.base + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                out = json.loads(r.read() or b"{}")
        except urllib.error.HTTPError as e:
            try:
                v = json.loads(e.read()).get("value", {})
            except ValueError:
                v = {}
            raise WebDriverError("%s %s: %s: %s" % (method, path, v.get("error", e.code),
                                                    v.get("message", "")[:500]))
        return out.get("value", out)

    def cmd(self, method, path, body=None):
        return self._call(method, "/session/%s%s" % (self.session, path), body)

    def get(self, url):
        self.cmd("POST", "/url", {"url": url})

    def js(self, script, *args):
        """Runs script (a function body; `arguments` are args) in the page."""
        return self.cmd("POST", "/execute/sync", {"script": script, "args": list(args)})

    def js_async(self, script, *args):
        """Runs script with a callback as its last argument; returns what it is called with."""
        return self.cmd("POST", "/execute/async", {"script": script, "args": list(args)})

    def wait(self, script, what, timeout=15, *args):
        """Polls script until it returns something truthy; returns it."""
        end = time.time() + timeout
        last = None
        while time.time() < end:
            try:
                last = self.js(script, *args)
            except WebDriverError as e:  # a page between two documents
                last = str(e)
                if "javascript error" in last:
                    raise
            else:
                if last:
                    return last
            time.sleep(0.1)
        raise AssertionError("waited %ss for %s; last: %r" % (timeout, what, last))

    def logs(self):
        """The browser's console and network log entries since the last call."""
        return self.cmd("POST", "/se/log", {"type": "browser"})

    def screenshot(self, path):
        png = base64.b64decode(self.cmd("GET", "/screenshot"))
        with open(path, "wb") as f:
            f.write(png)

    def close(self):
        if self.session:
            try:
                self._call("DELETE", "/session/" + self.session, timeout=20)
            except (OSError, WebDriverError):
                pass
            self.session = None
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
        self._log.close()
        shutil.rmtree(self.dir, ignore_errors=True)
