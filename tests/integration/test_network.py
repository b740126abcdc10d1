"""Tenant networks on the agent (docs/network.md), end to end on one machine:
two emulated nodes (network namespaces node-a and node-b of the test's own
making, on a bridge that stands for the data-centre network: tests/net/netlab.py)
run allot-agent --network on, driven by a fake allotd that hands out the
tasks' networks as allotd does. Checks: the tasks of one tenant reach each
other on one node and across nodes over the VXLAN overlay (TCP, UDP, ICMP);
another tenant's tasks, on the same node and across nodes, do not; a task
cannot reach the agent's port, the node's addresses or allotd, only its
gateway's ping; egress nat reaches outside, egress off does not; the
uplink's HTB classes hold a tenant's ceiling and both tenants' guarantees
under contention within 10 % (iperf3 through the overlay, measured at the
sender's uplink and as goodput: see docs/network.md); the same isolation
through the real allotd with --network on; after jobs end, and after an agent
kill -9 and restart (which adopts what runs and removes what nothing
needs), no namespace, link, nftables rule or tc class is left over; a task
sent without its network does not start; a ruleset flushed by someone else
comes back. Needs
root, iproute2, nftables, iperf3 and network namespaces."""

import json
import re
import os
import shutil
import signal
import subprocess
import sys
import time

import allotd_fixture as fx
import rdma_fixture
from cli_fixture import cli
from cli_fixture import ok as cli_ok

sys.path.insert(0, os.path.join(fx.SOURCE, "tests", "net"))
import netlab  # noqa: E402
from netlab import NODES, ok, sh  # noqa: E402

ECHO = r"""
import socket, threading
def tcp():
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("0.0.0.0", 9000)); s.listen(16)
    while True:
        c, _ = s.accept(); c.sendall(c.recv(100)); c.close()
def udp():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("0.0.0.0", 9001))
    while True:
        d, a = s.recvfrom(100); s.sendto(d, a)
threading.Thread(target=udp, daemon=True).start()
print("echo ready", flush=True)
tcp()
"""

PROBE = r"""
import socket, sys
kind, host, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM if kind == "tcp" else socket.SOCK_DGRAM)
s.settimeout(1.5)
try:
    if kind == "tcp":
        s.connect((host, port)); s.sendall(b"hi"); ok = s.recv(10) == b"hi"
    else:
        s.sendto(b"hi", (host, port)); ok = s.recvfrom(10)[0] == b"hi"
except OSError:
    ok = False
sys.exit(0 if ok else 1)
"""

A = {"tenant": "research/nlp", "vni": 4097, "subnet": "198.18.16.0/24",
     "gateway": "198.18.16.1", "egress": "nat", "allow": [], "prio": 0, "exclusive": False,
     "rate": {"guarantee_bps": 0, "ceil_bps": 0}}
B = {"tenant": "vision", "vni": 4098, "subnet": "198.18.17.0/24", "gateway": "198.18.17.1",
     "egress": "off", "allow": [], "prio": 3, "exclusive": False,
     "rate": {"guarantee_bps": 0, "ceil_bps": 0}}
AGENT_PORT = 7171

lab = None
agents = {}
echo_path = None
images = None


class NodeAgent:
    def __init__(self, node, server=None, token="t", env=None, args=()):
        self.node = node
        self.server, self.token, self.env, self.args = server, token, env, list(args)
        self.dir = fx.tempdir()
        os.chmod(self.dir, 0o755)
        self.log_path = os.path.join(self.dir, "agent.log")
        fx._logs.append(self.log_path)
        self.start()

    def start(self):
        args = ["--server", self.server or lab.url(), "--token", self.token, "--name", self.node,
                "--emulate", "1xL4",
                "--state-dir", self.dir, "--cgroup-root", fx.CGROUP_ROOT, "--grace", "1s",
                "--poll-wait", "300ms", "--heartbeat", "200ms",
                "--listen", "0.0.0.0:%d" % AGENT_PORT, "--network", "on",
                "--underlay-ip", NODES[self.node], "--uplink-rate", "200Mbit",
                "--image-dir", images] + self.args
        self.err = open(self.log_path, "a")
        self.proc = subprocess.Popen(netlab.agent_cmd(fx.AGENT, self.node) + args,
                                     stdout=subprocess.DEVNULL, stderr=self.err,
                                     env=dict(os.environ, **self.env) if self.env else None)
        fx._procs.append(self.proc)

    def stop(self, sig=signal.SIGTERM):
        if self.proc.poll() is None:
            os.kill(self.proc.pid, sig)
        self.proc.wait(timeout=15)
        self.err.close()
        log = self.log()  # a sanitizer build reports at exit
        assert "runtime error" not in log and "Sanitizer" not in log, log[-4000:]

    def log(self):
        with open(self.log_path, errors="replace") as f:
            return f.read()


def entry(job, task, net, address, command=None):
    spec = {"tenant": net["tenant"], "tasks": 1,
            "command": command or ["sh", "-c", "iperf3 -s -p 5201 >/dev/null 2>&1 & "
                                   "exec python3 " + echo_path]}
    if not command:  # the job's /tmp is its own: echo.py's folder is its working directory
        spec["workdir"] = os.path.dirname(echo_path)
    return {"job": job, "task": task, "cpu_milli": 0, "memory": 0, "gpus": [], "spec": spec,
            "network": dict(net, address=address)}


def failed_report(job):
    """The agent's report of job's task failing (waited for)."""
    def report():
        return next((r for r in lab.reports if r.get("id") == job and r.get("state") == "failed"),
                    None)
    wait(lambda: report() is not None, "job %d reported failed" % job)
    return report()


def wait(cond, what, timeout=20):
    end = time.time() + timeout
    while time.time() < end:
        if cond():
            return
        time.sleep(0.1)
    raise AssertionError("not within %ss: %s" % (timeout, what))


def probe_cmd(ns, kind, host, port=None):
    if kind == "icmp":
        cmd = ["busybox", "ping", "-c", "1", "-W", "1", host]
    else:
        cmd = ["python3", "-c", PROBE, kind, host, str(port)]
    return ["ip", "netns", "exec", ns] + cmd


def probes(specs):
    """Runs the probes (ns, kind, host, port) at once: whether each got through."""
    procs = [subprocess.Popen(probe_cmd(*p), stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL) for p in specs]
    return [p.wait(timeout=15) == 0 for p in procs]


def probe(ns, kind, host, port=None):
    return probes([(ns, kind, host, port)])[0]


def reach(ns, host):
    """(tcp, udp, icmp) from namespace ns to host's echo servers."""
    return tuple(probes([(ns, "tcp", host, 9000), (ns, "udp", host, 9001),
                         (ns, "icmp", host, None)]))


def ready(ns, host):
    return lambda: probe(ns, "tcp", host, 9000)


def wait_clean(before):
    for node in NODES:
        wait(lambda: netlab.snapshot(node) == before[node],
             "%s back as before: %r vs %r" % (node, netlab.snapshot(node), before[node]))


def test_isolation():
    lab.set_jobs({"node-a": [entry(1, 0, A, "198.18.16.10/24"), entry(1, 2, A, "198.18.16.12/24"),
                             entry(2, 0, B, "198.18.17.10/24")],
                  "node-b": [entry(1, 1, A, "198.18.16.11/24"), entry(2, 1, B, "198.18.17.11/24")]})
    for host in ("198.18.16.10", "198.18.16.12", "198.18.16.11"):
        wait(ready("allot-1-0" if host != "198.18.16.10" else "allot-1-2", host),
             "tenant A's echo server at " + host)
    for host in ("198.18.17.10", "198.18.17.11"):
        wait(ready("allot-2-0" if host != "198.18.17.10" else "allot-2-1", host),
             "tenant B's echo server at " + host)
    # one tenant: on the node and across the overlay, TCP, UDP and ICMP
    assert reach("allot-1-0", "198.18.16.12") == (True, True, True)
    assert reach("allot-1-0", "198.18.16.11") == (True, True, True)
    assert reach("allot-1-1", "198.18.16.10") == (True, True, True)
    assert reach("allot-2-1", "198.18.17.10") == (True, True, True)
    # another tenant: neither on the node nor across nodes, either way; the node: the
    # agent's port on any of its addresses, allotd, the data-centre network: nothing
    refused = []
    for src, dst in (("allot-1-0", "198.18.17.10"), ("allot-1-0", "198.18.17.11"),
                     ("allot-2-0", "198.18.16.10"), ("allot-2-0", "198.18.16.11"),
                     ("allot-2-1", "198.18.16.11")):
        refused += [(src, "tcp", dst, 9000), (src, "udp", dst, 9001), (src, "icmp", dst, None)]
    for src in ("allot-1-0", "allot-2-0"):
        for host in ("198.18.16.1", "198.18.17.1", "198.18.0.2", "198.18.0.3"):
            refused.append((src, "tcp", host, AGENT_PORT))
        refused += [(src, "tcp", netlab.TEST_ADDR, lab.port), (src, "icmp", "198.18.0.1", None)]
    refused += [("allot-2-0", "icmp", "198.18.16.1", None),  # another tenant's gateway
                ("allot-2-0", "icmp", "198.18.1.1", None)]  # egress off: not outside
    got = probes(refused)
    assert not any(got), [p for p, g in zip(refused, got) if g]
    assert ok(["python3", "-c", "import socket; socket.create_connection(('198.18.0.2', %d), 2)"
               % AGENT_PORT])  # the port is open, to the data centre
    # the gateway answers ping; egress nat reaches outside (not the data-centre network)
    assert probes([("allot-1-0", "icmp", "198.18.16.1", None),
                   ("allot-1-0", "icmp", "198.18.1.1", None)]) == [True, True]
    # VXLAN of a tenant's VNI from an address that is no peer of it is dropped
    rules = sh(["nft", "list", "table", "inet", "allot"], ns="node-a")
    # a leaf per priority: A's tasks are of priority 0, B's of 3
    cls = sh(["tc", "class", "show", "dev", "eth0"], ns="node-a")
    assert "a110:11 parent a110:10 prio 0" in cls and "a110:24 parent a110:20 prio 3" in cls, cls
    for vni in ("0x1001", "0x1002"):
        assert re.search(r"udp dport 4789 @th,96,24 %s ip saddr != \{? ?198\.18\.0\.3 ?\}? "
                         r"counter packets \d+ bytes \d+ drop" % vni, rules), rules


def test_rules_restored_after_a_flush():
    """Someone else flushes the node's ruleset (a restart of the nftables service does):
    the agent applies its table again at its next sync, and the tenants stay apart."""
    before = sh(["nft", "-s", "list", "table", "inet", "allot"], ns="node-a")
    sh(["nft", "flush", "ruleset"], ns="node-a")
    wait(lambda: ok(["ip", "netns", "exec", "node-a", "nft", "list", "table", "inet", "allot"]),
         "table inet allot back in node-a")
    assert sh(["nft", "-s", "list", "table", "inet", "allot"], ns="node-a") == before
    assert "changed or removed by someone else" in agents["node-a"].log()
    assert not any(probes([("allot-2-0", "tcp", "198.18.16.10", 9000),
                           ("allot-1-0", "tcp", "198.18.17.10", 9000)]))
    # once applied, an unchanged table is not applied again at every sync
    n = agents["node-a"].log().count("changed or removed by someone else")
    time.sleep(1.5)
    assert agents["node-a"].log().count("changed or removed by someone else") == n


def test_broken_bridge_mended():
    """A tenant's bridge broken by hand (down, its gateway address gone, its VXLAN link
    detached) is mended when a task of that tenant starts on the node: the new task
    reaches the tenant on the node and across it."""
    jobs = {"node-a": [entry(1, 0, A, "198.18.16.10/24"), entry(1, 2, A, "198.18.16.12/24"),
                       entry(2, 0, B, "198.18.17.10/24")],
            "node-b": [entry(1, 1, A, "198.18.16.11/24"), entry(2, 1, B, "198.18.17.11/24")]}
    rules = sh(["nft", "-s", "list", "table", "inet", "allot"], ns="node-a")
    sh(["ip", "link", "set", "alx-4097", "nomaster"], ns="node-a")
    sh(["ip", "addr", "flush", "dev", "alb-4097"], ns="node-a")
    sh(["ip", "link", "set", "alb-4097", "down"], ns="node-a")
    lab.set_jobs(dict(jobs, **{"node-a": jobs["node-a"] + [entry(63, 0, A, "198.18.16.63/24")]}))
    wait(ready("allot-63-0", "198.18.16.11"), "job 63 reaches A across the overlay")
    assert reach("allot-63-0", "198.18.16.10") == (True, True, True)
    assert probes([("allot-63-0", "icmp", "198.18.16.1", None)]) == [True]  # its gateway
    lab.set_jobs(jobs)
    wait(lambda: "allot-63-0" not in netns_all(), "job 63 gone")
    # and its address out of the rules again (the next test counts packets: a table
    # applied again meanwhile would start its counters from 0)
    wait(lambda: sh(["nft", "-s", "list", "table", "inet", "allot"], ns="node-a") == rules,
         "node-a's rules as before job 63")


def test_peers_follow_the_tasks():
    """When node-b's last task of tenant A ends, node-a's VXLAN device for A loses its
    entry for node-b (and A's VNI takes no packet from it); when one comes back, so does
    the entry, and a task with the ended one's address is reached at once."""
    def fdb(vni):
        return sh(["bridge", "fdb", "show", "dev", "alx-%d" % vni], ns="node-a")
    lab.set_jobs({"node-a": [entry(1, 0, A, "198.18.16.10/24"), entry(2, 0, B, "198.18.17.10/24")],
                  "node-b": [entry(2, 1, B, "198.18.17.11/24")]})
    def rules():
        return sh(["nft", "list", "table", "inet", "allot"], ns="node-a")
    wait(lambda: "dst 198.18.0.3" not in fdb(4097) and
         "udp dport 4789 @th,96,24 0x1001 counter" in rules(),
         "node-b gone from VNI 4097: %s %s" % (fdb(4097), rules()))
    assert "00:00:00:00:00:00 dst 198.18.0.3" in fdb(4098), fdb(4098)
    # (a task is never started twice: it comes back once its agent forgot it)
    wait(lambda: "allot-1-1" not in netns_all(), "node-b's task of A gone")
    lab.set_jobs({"node-a": [entry(1, 0, A, "198.18.16.10/24"), entry(2, 0, B, "198.18.17.10/24")],
                  "node-b": [entry(1, 1, A, "198.18.16.11/24"), entry(2, 1, B, "198.18.17.11/24")]})
    wait(lambda: "00:00:00:00:00:00 dst 198.18.0.3" in fdb(4097), "node-b back in VNI 4097")
    wait(ready("allot-1-0", "198.18.16.11"), "tenant A across nodes again")
    # a new task with the address of an ended one has its MAC: nobody's ARP cache is wrong
    link = json.loads(sh(["ip", "-n", "allot-1-1", "-j", "link", "show", "dev", "eth0"]))
    assert link[0]["address"] == "06:a1:c6:12:10:0b", link


def test_container_in_tenant_network():
    """A job in an image (crun) runs in its task's namespace too: its address, and its
    tenant's other tasks across the overlay."""
    if not shutil.which("crun"):
        print("SKIP container check: no crun (scripts/install-deps)")
        return
    jobs = {n: list(lab.jobs[n]) for n in NODES}
    c = entry(5, 0, A, "198.18.16.30/24",
              command=["sh", "-c", "ip -4 addr show dev eth0; echo hello | nc -w 2 "
                       "198.18.16.11 9000; echo; echo done"])
    c["spec"]["image"] = "bb"
    jobs["node-a"].append(c)
    lab.set_jobs(jobs)
    path = os.path.join(agents["node-a"].dir, "logs", "5", "task-0.log")

    def out():
        try:
            with open(path, errors="replace") as f:
                return f.read()
        except OSError:
            return ""
    wait(lambda: "done" in out(), "the container's output")
    assert "inet 198.18.16.30/24" in out() and "hello" in out(), out()


def busybox_image(root):
    """A root file system of busybox (Debian's busybox-static): IMAGE-DIR/bb."""
    fs = os.path.join(root, "bb")
    for d in ("bin", "proc", "sys", "dev", "tmp", "etc"):
        os.makedirs(os.path.join(fs, d))
    shutil.copy("/bin/busybox", os.path.join(fs, "bin", "busybox"))
    for tool in ("sh", "echo", "ip", "nc"):
        os.symlink("busybox", os.path.join(fs, "bin", tool))
    return root


VXLAN_SEND = r"""
import socket, struct, sys
vni, mac = int(sys.argv[1]), bytes.fromhex(sys.argv[2])
arp = struct.pack("!HHBBH6s4s6s4s", 1, 0x0800, 6, 4, 1, mac, socket.inet_aton("198.18.16.99"),
                  b"\0" * 6, socket.inet_aton("198.18.16.10"))
frame = b"\xff" * 6 + mac + b"\x08\x06" + arp
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.sendto(struct.pack("!B3x", 8) + vni.to_bytes(3, "big") + b"\0" + frame, ("198.18.0.2", 4789))
"""


def test_vxlan_only_from_peers():
    """A frame sent into tenant A's VNI on node-a from the data centre's own address (no
    peer) is dropped by the input rule; the same from node-b (a peer) reaches the bridge."""
    def fdb():
        return sh(["bridge", "fdb", "show", "br", "alb-4097"], ns="node-a")

    def dropped():
        rules = sh(["nft", "list", "table", "inet", "allot"], ns="node-a")
        m = re.search(r"@th,96,24 0x1001 ip saddr != .*counter packets (\d+)", rules)
        assert m, rules
        return int(m.group(1))
    before = dropped()
    sh(["python3", "-c", VXLAN_SEND, "4097", "020000000099"], ns=netlab.DC)
    wait(lambda: dropped() == before + 1, "the spoofed VXLAN packet counted as dropped")
    assert "02:00:00:00:00:99" not in fdb(), fdb()
    sh(["python3", "-c", VXLAN_SEND, "4097", "020000000098"], ns="node-b")
    wait(lambda: "02:00:00:00:00:98 dev alx-4097" in fdb(), "the peer's frame on the bridge")
    assert dropped() == before + 1


def iperf(ns, host, seconds=4):
    p = subprocess.Popen(["ip", "netns", "exec", ns, "iperf3", "-c", host, "-p", "5201", "-t",
                          str(seconds), "-O", "1", "-J"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    return p


def mbit(p):
    """(goodput in Mbit/s, seconds it sent) of an iperf3 client."""
    out, err = p.communicate(timeout=30)
    r = json.loads(out)
    assert "error" not in r, r.get("error")
    return (r["end"]["sum_received"]["bits_per_second"] / 1e6,
            r["end"]["sum_sent"]["seconds"])


def class_bytes(minor):
    """Bytes sent through HTB class a110:MINOR of node-a's uplink (tc's text: its JSON
    output leaves out HTB's classes)."""
    out = sh(["tc", "-s", "class", "show", "dev", "eth0"], ns="node-a")
    m = re.search(r"class htb a110:%x .*\n Sent (\d+) bytes" % minor, out)
    assert m, out
    return int(m.group(1))


def measure(pairs, seconds=5):
    """Runs iperf3 for each (ns, host, tenant class minor) at once; returns per pair
    (goodput Mbit/s after the first second, Mbit/s through its HTB class on node-a's
    uplink over 3 s of the steady state: after the first second, before the end)."""
    procs = [iperf(ns, host, seconds) for ns, host, _ in pairs]
    time.sleep(1.2)
    b0, t0 = [class_bytes(m) for _, _, m in pairs], time.time()
    time.sleep(3.0)
    b1, t1 = [class_bytes(m) for _, _, m in pairs], time.time()
    good = [mbit(p)[0] for p in procs]
    return [(g, (y - x) * 8 / (t1 - t0) / 1e6) for g, x, y in zip(good, b0, b1)]


def with_rates(ra, rb):
    a, b = dict(A, rate=ra), dict(B, rate=rb)
    lab.set_jobs({"node-a": [entry(1, 0, a, "198.18.16.10/24"), entry(2, 0, b, "198.18.17.10/24")],
                  "node-b": [entry(1, 1, a, "198.18.16.11/24"), entry(2, 1, b, "198.18.17.11/24")]})

    def applied():
        cls = sh(["tc", "class", "show", "dev", "eth0"], ns="node-a")
        return all("rate %dMbit" % (r["guarantee_bps"] // 10 ** 6) in cls
                   for r in (ra, rb) if r["guarantee_bps"]) and \
            all("ceil %dMbit" % (r["ceil_bps"] // 10 ** 6) in cls for r in (ra, rb)
                if r["ceil_bps"])
    wait(applied, "the tc classes of %r %r: %s" % (
        ra, rb, sh(["tc", "class", "show", "dev", "eth0"], ns="node-a")))


# iperf3's goodput per byte on the uplink: a 1,398-byte TCP segment (MTU 1450, timestamps)
# is 1,514 bytes there with its inner (14 + 20 + 32) and outer (14 + 20 + 8 + 8) headers
GOODPUT = 1398.0 / 1514.0


def test_bandwidth():
    # A (a110:10) alone, ceiling 80 Mbit/s of the uplink's 200
    with_rates({"guarantee_bps": 20 * 10 ** 6, "ceil_bps": 80 * 10 ** 6},
               {"guarantee_bps": 20 * 10 ** 6, "ceil_bps": 0})
    wait(ready("allot-1-0", "198.18.16.11"), "tenant A's server")
    (good, wire), = measure([("allot-1-0", "198.18.16.11", 0x10)])
    print("ceiling 80: goodput %.1f, at the uplink %.1f Mbit/s" % (good, wire))
    assert abs(wire - 80) <= 8 and abs(good - 80 * GOODPUT) <= 8 * GOODPUT, (wire, good)
    # both at once, guarantees 50 and 150 of 200: each gets its own
    with_rates({"guarantee_bps": 50 * 10 ** 6, "ceil_bps": 200 * 10 ** 6},
               {"guarantee_bps": 150 * 10 ** 6, "ceil_bps": 200 * 10 ** 6})
    wait(ready("allot-2-0", "198.18.17.11"), "tenant B's server")
    (ga, wa), (gb, wb) = measure([("allot-1-0", "198.18.16.11", 0x10),
                                  ("allot-2-0", "198.18.17.11", 0x20)])
    print("guarantees 50/150: goodput %.1f/%.1f, at the uplink %.1f/%.1f Mbit/s"
          % (ga, gb, wa, wb))
    assert abs(wa - 50) <= 5 and abs(wb - 150) <= 15, (wa, wb)
    assert abs(ga - 50 * GOODPUT) <= 5 * GOODPUT and abs(gb - 150 * GOODPUT) <= 15 * GOODPUT, \
        (ga, gb)


def test_priorities():
    """Two tasks of one tenant on node-a, of priority 0 (inference) and 7 (training), both
    sending: each leaf gets its share of the tenant's guarantee (10 of 20 Mbit/s), and what
    is left up to the ceiling goes to priority 0 first."""
    a = dict(A, rate={"guarantee_bps": 20 * 10 ** 6, "ceil_bps": 200 * 10 ** 6})
    lab.set_jobs({"node-a": [entry(1, 0, a, "198.18.16.10/24"),
                             entry(1, 2, dict(a, prio=7), "198.18.16.13/24")],
                  "node-b": [entry(1, 1, a, "198.18.16.11/24"), entry(1, 3, a, "198.18.16.14/24")]})
    wait(lambda: "a110:18 parent a110:10 prio 7" in
         sh(["tc", "class", "show", "dev", "eth0"], ns="node-a"), "the priority-7 leaf")
    wait(ready("allot-1-0", "198.18.16.11"), "a server on node-b")
    wait(ready("allot-1-2", "198.18.16.14"), "the other server on node-b")
    (g0, w0), (g7, w7) = measure([("allot-1-0", "198.18.16.11", 0x11),
                                  ("allot-1-2", "198.18.16.14", 0x18)])
    print("priorities 0/7: goodput %.1f/%.1f, at the uplink %.1f/%.1f Mbit/s" % (g0, g7, w0, w7))
    assert abs(w7 - 10) <= 1 and abs(w0 - 190) <= 19, (w0, w7)


def test_teardown_after_jobs_end():
    lab.set_jobs({})
    wait_clean(BEFORE)


def test_agent_kill_and_restart():
    lab.set_jobs({"node-a": [entry(3, 0, A, "198.18.16.20/24"), entry(4, 0, B, "198.18.17.20/24")],
                  "node-b": [entry(3, 1, A, "198.18.16.21/24")]})
    wait(ready("allot-3-0", "198.18.16.21"), "job 3 across nodes")
    wait(ready("allot-4-0", "198.18.17.20"), "job 4")
    agents["node-a"].stop(signal.SIGKILL)
    # while it is down: job 4 is no longer wanted, and strays of allot's appear
    lab.set_jobs({"node-a": [entry(3, 0, A, "198.18.16.20/24")],
                  "node-b": [entry(3, 1, A, "198.18.16.21/24")]})
    sh(["ip", "-n", "node-a", "link", "add", "alb-999", "type", "bridge"])
    sh(["ip", "-n", "node-a", "link", "add", "al-000000000999", "type", "veth", "peer", "name",
        "x-stray"])
    sh(["ip", "netns", "add", "allot-999-0"])
    sh(["ip", "-n", "allot-999-0", "link", "set", "lo", "alias", "allot:node-a"])
    agents["node-a"].start()
    # job 3 is adopted where it runs (its echo server keeps its pid), the rest goes
    wait(lambda: "allot-999-0" not in netns_all() and "allot-4-0" not in netns_all(),
         "stray namespaces removed")
    links = lambda: json.dumps(json.loads(sh(["ip", "-j", "link", "show"], ns="node-a")))  # noqa
    wait(lambda: "alb-999" not in links() and "al-000000000999" not in links()
         and "alb-4098" not in links(), "stray links removed")
    # the adopted job reaches its peer again (the agent rebuilt its rules;
    # each probe waits at most a second, so retry on a loaded machine)
    wait(lambda: reach("allot-3-0", "198.18.16.21") == (True, True, True),
         "job 3 reaches its other task after the restart (tcp, udp, icmp)")
    assert "allot-3-0" in netns_all()
    # the rules follow the links (the agent applies its table again once the
    # stray is gone: a sync later on a loaded machine)
    rules = lambda: sh(["nft", "list", "table", "inet", "allot"], ns="node-a")  # noqa
    wait(lambda: "alb-4097" in rules() and "alb-4098" not in rules(),
         "the rules of the stray tenant network removed")
    lab.set_jobs({})
    wait_clean(BEFORE)
    assert "adopted" in agents["node-a"].log()


class NetDaemon(fx.Daemon):
    """The real allotd on the test's address in the data centre (198.18.0.254)."""

    def _find_port(self, timeout):
        end = time.time() + timeout
        while time.time() < end:
            with open(self.stderr_path) as f:
                for line in f:
                    if line.startswith("listening on %s:" % netlab.TEST_ADDR):
                        return int(line.strip().rsplit(":", 1)[1])
            if self.proc.poll() is not None:
                raise AssertionError("allotd exited: " + open(self.stderr_path).read())
            time.sleep(0.02)
        raise AssertionError("no `listening on` line within %ss" % timeout)

    def conn(self):
        import http.client
        return http.client.HTTPConnection(netlab.TEST_ADDR, self.port, timeout=10)


TENANTS = {
    "version": 1,
    "tenants": [
        {"path": "nlp", "quotas": {"gpu": 8, "network": {
            "nominal": "50Mbit", "borrow_limit": "50Mbit", "egress": "nat"}}},
        {"path": "vision", "quotas": {"gpu": 8, "network": {
            "nominal": "20Mbit", "egress": "allow", "allow": ["198.18.1.2/32"]}}},
    ],
}


def test_with_allotd():
    """The same through the real allotd (--network on): addresses, VNIs, rates and peers
    come from its desired state; the agents register their underlay address."""
    global agents
    for ag in agents.values():
        ag.stop()
    dm = NetDaemon(args=["--listen", netlab.TEST_ADDR + ":0", "--network", "on",
                         "--net-pool", "198.18.64.0/20", "--net-prefix", "26"])
    try:
        fx.expect(dm.req("PUT", "/v1/tenants", TENANTS, token=dm.admin), 200)
        tok = dm.token("agent", "", "agents")
        agents = {n: NodeAgent(n, server="http://%s:%d" % (netlab.TEST_ADDR, dm.port),
                               token=tok) for n in NODES}

        def nodes():
            return fx.expect(dm.req("GET", "/v1/nodes", token=dm.admin), 200)["nodes"]
        wait(lambda: len(nodes()) == 2, "both nodes registered")
        cmd = ["sh", "-c", "exec python3 " + echo_path]

        def submit(body):
            body = dict({"cpus": 0.5, "memory": 256, "command": cmd,
                         "workdir": os.path.dirname(echo_path)}, **body)
            return fx.expect(dm.req("POST", "/v1/jobs", body, token=dm.admin), 201)["id"]
        gang = submit({"tenant": "nlp", "tasks": 2, "gpus": 1})
        solo = submit({"tenant": "vision", "gpus": 0})

        def job(jid):
            return fx.expect(dm.req("GET", "/v1/jobs/%d" % jid, token=dm.admin), 200)
        wait(lambda: job(gang)["state"] == "running" and job(solo)["state"] == "running",
             "both jobs running")
        g, v = job(gang), job(solo)
        tasks = g["placement"]["tasks"]
        assert {t["node"] for t in tasks} == set(NODES), g
        addr = [t["address"].split("/")[0] for t in tasks]
        vaddr = v["placement"]["tasks"][0]["address"].split("/")[0]
        ns = ["allot-%d-%d" % (gang, i) for i in range(2)]
        vns = "allot-%d-0" % solo
        wait(ready(ns[0], addr[1]), "the gang's second task from its first")
        wait(ready(vns, vaddr), "the vision task's own server")
        assert reach(ns[0], addr[1]) == (True, True, True)
        assert reach(ns[1], addr[0]) == (True, True, True)
        got = probes([(vns, "tcp", a, 9000) for a in addr] + [(vns, "icmp", a, None) for a in addr]
                     + [(ns[0], "tcp", vaddr, 9000), (vns, "icmp", "198.18.1.1", None)])
        assert not any(got), got
        # nlp: egress nat; vision: egress allow, its list only
        assert probes([(ns[0], "icmp", "198.18.1.1", None), (vns, "icmp", "198.18.1.2", None)]) \
            == [True, True]
        # the tenants' traffic, as the agents count it, in allotd's /metrics
        def counted():
            m = dm.req("GET", "/metrics", raw=True)[1]
            got = re.search(r'allot_tenant_network_transmit_bytes_total\{tenant="nlp"\} (\d+)', m)
            return got and int(got.group(1)) > 0
        wait(counted, "nlp's bytes in /metrics")
        # and a user sees the job's network
        r = cli_ok(cli(dm, "show", str(gang), server="http://%s:%d" % (netlab.TEST_ADDR, dm.port)))
        assert "network:" in r.out and g["network"]["subnet"] in r.out and addr[0] in r.out, r.out
        # the rates of the tenants' quotas on the uplink of the gang's first node
        cls = sh(["tc", "class", "show", "dev", "eth0"], ns=tasks[0]["node"])
        assert "rate 50Mbit ceil 100Mbit" in cls, cls
        for jid in (gang, solo):
            fx.expect(dm.req("POST", "/v1/jobs/%d/cancel" % jid, token=dm.admin), 200)
        wait_clean(BEFORE)
    finally:
        for ag in agents.values():
            if ag.proc.poll() is None:
                ag.stop()
        dm.stop()


def test_no_firewall_no_task():
    """When the node's rules cannot be applied (here an nft that always fails), the task
    does not start without them: it fails with the reason, and nothing of it is left."""
    stub = fx.tempdir()
    with open(os.path.join(stub, "nft"), "w") as f:
        f.write("#!/bin/sh\n[ \"$1\" = --version ] && exit 0\n"
                "echo 'nft: refused by the test' >&2\nexit 1\n")
    os.chmod(os.path.join(stub, "nft"), 0o755)
    agents["node-a"].stop()
    agents["node-a"] = NodeAgent("node-a", env={"PATH": stub + ":" + os.environ["PATH"]})
    try:
        lab.set_jobs({"node-a": [entry(6, 0, A, "198.18.16.40/24")]})
        r = failed_report(6)
        assert "rules could not be applied" in r.get("detail", ""), r
        assert "nft: refused by the test" in agents["node-a"].log()
        lab.set_jobs({})
        wait(lambda: "allot-6-0" not in netns_all(), "job 6's namespace removed")
        links = json.loads(sh(["ip", "-j", "link", "show"], ns="node-a"))
        assert not [x["ifname"] for x in links if x["ifname"].startswith("al")], links
    finally:
        agents["node-a"].stop()
        agents["node-a"] = NodeAgent("node-a")
    wait_clean(BEFORE)


def test_task_without_network_fails():
    """A task that comes without its network from an allotd that runs tenant networks
    (its replies carry the overlays' peers) does not start in the node's own network:
    it fails, saying why, and nothing of it is left; nor does one whose tenant subnet
    lies over the node's own network."""
    def fails_alone(e, why):
        """Sends task e alone to node-a: it fails saying why, and leaves nothing."""
        lab.set_jobs({"node-a": [e]})
        r = failed_report(e["job"])
        assert why in r.get("detail", ""), r
        lab.set_jobs({})
        wait(lambda: "allot-%d-0" % e["job"] not in netns_all(), "job %d left nothing" % e["job"])
    e = entry(61, 0, A, "198.18.16.41/24")
    del e["network"]
    fails_alone(e, "does not start outside its tenant's network")
    # nor in a subnet over the node's own network (its route would take the node's
    # traffic there into the tenant's bridge)
    wide = dict(A, subnet="198.18.0.0/16", gateway="198.18.5.1")
    fails_alone(entry(62, 0, wide, "198.18.5.10/16"), "overlaps this node's network 198.18.0.0/24")
    wait_clean(BEFORE)


def links_of(ns):
    """The links in namespace ns by name ({} when there is no such namespace)."""
    out = sh(["ip", "-j", "link", "show"], ns=ns, check=False)
    return {l["ifname"]: l for l in json.loads(out or "[]")}


def vf_netdev(name):
    """A stand-in for a VF's netdev in node-a: one end of a veth pair (NAME, NAME-p), a
    virtual link as a dummy would be, of a kind the lab's kernel surely has. Like a dummy
    (and unlike a VF) it goes with a namespace that is deleted while it is in there."""
    sh(["ip", "-n", "node-a", "link", "add", name, "type", "veth", "peer", "name", name + "-p"])


def test_rdma_vf_netdevs():
    """RDMA VFs (a made-up sysfs, --sysfs: an HCA with two VFs whose netdevs rvf0 and rvf1
    are links in node-a): a task asking for one gets its VF's netdev in its
    namespace, up, with IPv6 off, and it comes back to the node when the task ends; a netdev that cannot
    move fails the task with the reason; after an agent kill -9 the netdev of a task that
    ended while the agent was down comes back at the restart, and so does that of a task
    allotd stopped wanting meanwhile."""
    tree = fx.tempdir()
    rdma_fixture.sysfs_tree(tree, 2)
    for dev in ("rvf0", "rvf1"):
        vf_netdev(dev)
    agents["node-a"].stop()
    agents["node-a"] = NodeAgent("node-a", args=["--sysfs", tree])
    cmd = ["sh", "-c", "echo env $ALLOT_RDMA_VFS $ALLOT_RDMA_NETDEVS; exec sleep 1000"]

    def with_vf(job, net, address):
        return dict(entry(job, 0, net, address, command=cmd), rdma_vfs=1)

    def task_log(job):
        try:
            with open(os.path.join(agents["node-a"].dir, "logs", str(job), "task-0.log")) as f:
                return f.read()
        except OSError:
            return ""

    def at(dev, ns):
        return dev in links_of(ns)
    try:
        wait(lambda: lab.registered["node-a"].get("rdma") == [{"name": "mlx5_0", "vfs": 2}],
             "node-a registered with its VFs")
        lab.set_jobs({"node-a": [with_vf(7, A, "198.18.16.50/24"),
                                 with_vf(8, B, "198.18.17.50/24")]})
        wait(lambda: at("rvf0", "allot-7-0") and at("rvf1", "allot-8-0"), "the VFs' netdevs moved")
        assert "UP" in links_of("allot-7-0")["rvf0"]["flags"], links_of("allot-7-0")
        # with no IPv6 (no link-local address to talk past the rules with)
        assert sh(["cat", "/proc/sys/net/ipv6/conf/rvf0/disable_ipv6"],
                  ns="allot-7-0").strip() == "1"
        assert sh(["ip", "-6", "addr", "show", "dev", "rvf0"], ns="allot-7-0").strip() == ""
        assert not at("rvf0", "node-a") and not at("rvf1", "node-a")
        wait(lambda: "env 0000:3b:00.1 rvf0" in task_log(7), "job 7's environment")
        # job 8 ends: its netdev is the node's again
        lab.set_jobs({"node-a": [with_vf(7, A, "198.18.16.50/24")]})
        wait(lambda: at("rvf1", "node-a") and "allot-8-0" not in netns_all(), "rvf1 back")
        # a netdev that is not there cannot move: the task does not start
        sh(["ip", "-n", "node-a", "link", "del", "rvf1"])
        lab.set_jobs({"node-a": [with_vf(7, A, "198.18.16.50/24"),
                                 with_vf(10, B, "198.18.17.51/24")]})
        r = failed_report(10)
        assert "its netdev rvf1 cannot move into allot-10-0" in r.get("detail", ""), r
        vf_netdev("rvf1")
        # job 7's process ends while its agent is down (kill -9)
        lab.set_jobs({"node-a": [with_vf(7, A, "198.18.16.50/24")]})
        wait(lambda: "allot-10-0" not in netns_all(), "job 10 forgotten")
        agents["node-a"].stop(signal.SIGKILL)
        with open(os.path.join(agents["node-a"].dir, "tasks", "7-0", "pid")) as f:
            os.kill(int(f.read().split()[1]), signal.SIGKILL)
        agents["node-a"].start()
        wait(lambda: at("rvf0", "node-a"), "rvf0 back after the restart")
        # job 9 runs with rvf0; the agent is killed; allotd no longer wants job 9
        lab.set_jobs({"node-a": [with_vf(9, A, "198.18.16.52/24")]})
        wait(lambda: at("rvf0", "allot-9-0"), "rvf0 in job 9's namespace")
        agents["node-a"].stop(signal.SIGKILL)
        lab.set_jobs({})
        agents["node-a"].start()
        wait(lambda: at("rvf0", "node-a") and "allot-9-0" not in netns_all(),
             "rvf0 back from the task stopped after the restart")
        assert at("rvf1", "node-a")
    finally:
        agents["node-a"].stop()
        for dev in ("rvf0", "rvf1", "rvf0-p", "rvf1-p"):
            sh(["ip", "-n", "node-a", "link", "del", dev], check=False)
        agents["node-a"] = NodeAgent("node-a")
    wait_clean(BEFORE)


def netns_all():
    return netlab.netns_list()


BEFORE = {}

if __name__ == "__main__":
    missing = [t for t in ("ip", "nft", "tc", "bridge", "iperf3", "nsenter", "busybox") if
               not shutil.which(t)]
    if os.geteuid() != 0 or missing:
        print("SKIP: tenant networks need root and %s" % (", ".join(missing) or
                                                          "network namespaces"))
        raise SystemExit(0)
    echo_dir = fx.tempdir()
    os.chmod(echo_dir, 0o755)
    echo_path = os.path.join(echo_dir, "echo.py")
    with open(echo_path, "w") as f:
        f.write(ECHO)
    os.chmod(echo_path, 0o644)
    images = busybox_image(fx.tempdir())
    os.chmod(images, 0o755)
    netlab.setup()
    try:
        BEFORE.update({n: netlab.snapshot(n) for n in NODES})
        lab = netlab.FakeAllotd()
        agents = {n: NodeAgent(n) for n in NODES}
        wait(lambda: set(lab.registered) == set(NODES), "both agents registered")
        for n in NODES:
            assert lab.registered[n]["underlay"] == NODES[n], lab.registered[n]
            assert lab.registered[n]["rdma"] == [], lab.registered[n]
        fx.run([test_isolation, test_rules_restored_after_a_flush, test_broken_bridge_mended,
                test_vxlan_only_from_peers, test_container_in_tenant_network,
                test_peers_follow_the_tasks, test_bandwidth, test_priorities, test_teardown_after_jobs_end,
                test_agent_kill_and_restart, test_no_firewall_no_task,
                test_task_without_network_fails, test_rdma_vf_netdevs,
                test_with_allotd])
    finally:
        for ag in agents.values():
            if ag.proc.poll() is None:
                ag.stop()
        if lab:
            lab.close()
        netlab.teardown()
        for ns in netlab.netns_list():
            if ns.startswith("allot-") and ns != netlab.DC:
                subprocess.run(["ip", "netns", "del", ns])
