"""A small data centre on one machine for the tenant-network tests
(tests/integration/test_network.py, docs/network.md).

Each emulated node is a network namespace made here (node-a, node-b) with
one interface, eth0, on a bridge that stands for the data-centre network,
in a namespace of its own (allot-dc). The test's own namespace gets one
veth into that bridge (nettest-dc, 198.18.0.254/24): the fake allotd listens
there. Addresses come from 198.18.0.0/15 only, inside these namespaces;
nothing is routed anywhere else and no default route is touched.

    198.18.0.1/24, 198.18.1.1/24,  dc0, the bridge (allot-dc): "outside"
    198.18.1.2/24
    198.18.0.2, 198.18.0.3         node-a, node-b (eth0)
    198.18.0.254                   the test (nettest-dc)

FakeAllotd answers the agent's registration and heartbeats with a desired
state the test sets (jobs with their network, each node's VXLAN peers),
so the agent is tested alone, as allotd's desired state will drive it.
"""

import fcntl
import json
import os
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

DC = "allot-dc"
NODES = {"node-a": "198.18.0.2", "node-b": "198.18.0.3"}
TEST_IF = "nettest-dc"
TEST_ADDR = "198.18.0.254"


def sh(cmd, check=True, timeout=30, ns=None):
    """Runs cmd (a list) in namespace ns (None: the test's own); returns stdout."""
    if ns:
        cmd = ["ip", "netns", "exec", ns] + cmd
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if check and r.returncode:
        raise AssertionError("%s: %s %s" % (" ".join(cmd), r.stdout, r.stderr))
    return r.stdout


def ok(cmd, ns=None, timeout=10):
    """True when cmd exits 0."""
    if ns:
        cmd = ["ip", "netns", "exec", ns] + cmd
    try:
        return subprocess.run(cmd, capture_output=True, timeout=timeout).returncode == 0
    except subprocess.TimeoutExpired:
        return False


def netns_list():
    return sorted(line.split()[0] for line in sh(["ip", "netns", "list"]).splitlines() if line)


def marked(ns):
    """The node whose agent made namespace ns (the alias of its loopback), or None."""
    r = subprocess.run(["ip", "-n", ns, "-j", "link", "show", "dev", "lo"],
                       capture_output=True, text=True, timeout=10)
    try:
        alias = json.loads(r.stdout)[0].get("ifalias", "") if r.returncode == 0 else ""
    except (ValueError, IndexError):
        alias = ""
    return alias[len("allot:"):] if alias.startswith("allot:") else None


def teardown():
    """Removes the lab (also what an earlier, interrupted run left), and the tasks'
    namespaces its agents left."""
    for ns in netns_list():
        if ns.startswith("allot-") and marked(ns) in NODES:
            sh(["ip", "netns", "del", ns], check=False)
    for ns in list(NODES) + [DC]:
        if ns in netns_list():
            sh(["ip", "netns", "del", ns], check=False)
    sh(["ip", "link", "del", TEST_IF], check=False)


_lock = None


def setup():
    """Makes the lab; one run at a time on a machine (the names are fixed)."""
    global _lock
    _lock = open("/run/allot-test-network.lock", "w")
    fcntl.flock(_lock, fcntl.LOCK_EX)
    teardown()
    sh(["ip", "netns", "add", DC])
    sh(["ip", "-n", DC, "link", "add", "dc0", "type", "bridge"])
    sh(["ip", "-n", DC, "addr", "add", "198.18.0.1/24", "dev", "dc0"])
    sh(["ip", "-n", DC, "addr", "add", "198.18.1.1/24", "dev", "dc0"])
    sh(["ip", "-n", DC, "addr", "add", "198.18.1.2/24", "dev", "dc0"])
    sh(["ip", "-n", DC, "link", "set", "dc0", "up"])
    sh(["ip", "-n", DC, "link", "set", "lo", "up"])
    for i, (node, addr) in enumerate(sorted(NODES.items())):
        sh(["ip", "netns", "add", node])
        port = "dc-%d" % i
        sh(["ip", "-n", DC, "link", "add", port, "type", "veth", "peer", "name", "eth0",
            "netns", node])
        sh(["ip", "-n", DC, "link", "set", port, "master", "dc0", "up"])
        sh(["ip", "-n", node, "addr", "add", addr + "/24", "dev", "eth0"])
        sh(["ip", "-n", node, "link", "set", "eth0", "up"])
        sh(["ip", "-n", node, "link", "set", "lo", "up"])
        # "outside" (198.18.1.0/24) is reached through the data centre's router
        sh(["ip", "-n", node, "route", "add", "198.18.1.0/24", "via", "198.18.0.1"])
    sh(["ip", "link", "add", TEST_IF, "type", "veth", "peer", "name", "dc-t", "netns", DC])
    sh(["ip", "-n", DC, "link", "set", "dc-t", "master", "dc0", "up"])
    sh(["ip", "addr", "add", TEST_ADDR + "/24", "dev", TEST_IF])
    sh(["ip", "link", "set", TEST_IF, "up"])


def snapshot(node):
    """What allot may leave on a node: links, the nftables ruleset, the uplink's tc tree,
    the namespaces allot-* marked as the node's."""
    links = sorted(l["ifname"] for l in json.loads(sh(["ip", "-j", "link", "show"], ns=node)))
    mine = [ns for ns in netns_list() if ns.startswith("allot-") and marked(ns) == node]
    return {"links": links, "nft": sh(["nft", "list", "ruleset"], ns=node),
            "qdisc": sh(["tc", "qdisc", "show", "dev", "eth0"], ns=node),
            "class": sh(["tc", "class", "show", "dev", "eth0"], ns=node), "netns": mine}


class FakeAllotd:
    """Registration and heartbeats as allotd answers them, for a desired state set by
    the test: jobs[node] = [entry...]; peers follow from where each VNI has tasks."""

    def __init__(self):
        self.lock = threading.Condition()
        self.jobs = {n: [] for n in NODES}
        self.underlay = {}
        self.reports = []
        self.version = 1
        self.registered = {}
        fake = self

        class H(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"] or 0))
                                  or b"{}")
                if self.path.split("?")[0] == "/v1/nodes/register":
                    with fake.lock:
                        fake.registered[body["name"]] = body
                        fake.underlay[body["name"]] = body.get("underlay")
                    return self.reply(201, {"lease_expiry": int(time.time()) + 60})
                parts = self.path.split("/")
                if len(parts) == 5 and parts[4] == "heartbeat":
                    return self.reply(200, fake.heartbeat(parts[3], body))
                return self.reply(404, {"error": {"code": "not_found", "message": "no"}})

            def reply(self, st, obj):
                data = json.dumps(obj).encode()
                self.send_response(st)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        class Server(ThreadingHTTPServer):
            def handle_error(self, request, client_address):
                pass  # an agent killed with -9 in the middle of its long poll

        self.srv = Server((TEST_ADDR, 0), H)
        self.port = self.srv.server_address[1]
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()

    def heartbeat(self, node, body):
        with self.lock:
            self.reports += [dict(r, node=node) for r in body.get("jobs", [])]
            if body.get("known") == str(self.version) and body.get("wait_ms"):
                self.lock.wait(min(body["wait_ms"], 300) / 1000.0)
            return {"version": str(self.version), "jobs": self.jobs.get(node, []),
                    "network": {"peers": self.peers(node)}}

    def peers(self, node):
        out = {}
        for n, entries in self.jobs.items():
            for e in entries:
                if "network" in e:
                    out.setdefault(str(e["network"]["vni"]), set())
                    if n != node and self.underlay.get(n):
                        out[str(e["network"]["vni"])].add(self.underlay[n])
        mine = {str(e["network"]["vni"]) for e in self.jobs.get(node, []) if "network" in e}
        return {k: sorted(v) for k, v in out.items() if k in mine}

    def set_jobs(self, jobs):
        with self.lock:
            self.jobs = {n: list(jobs.get(n, [])) for n in NODES}
            self.version += 1
            self.lock.notify_all()

    def url(self):
        return "http://%s:%d" % (TEST_ADDR, self.port)

    def close(self):
        self.srv.shutdown()
        self.srv.server_close()


def agent_cmd(agent, node):
    """allot-agent in node's network namespace. Only the network namespace: the agent
    keeps the host's mounts (cgroups, /run/netns, where the test sees the tasks'
    namespaces); /sys/class/net is the host's, which the agent does not read."""
    return ["nsenter", "--net=/run/netns/" + node, agent]
