"""Tenant networks in allotd (the agent's side is test_network.py): with
--network on each tenant gets its own subnet of net-pool and VXLAN id, kept
across restarts; every task of a running job gets a free address in it;
the desired state carries each task's network (address, gateway, rates and
egress from the tenant's quotas.network) and each node its VXLAN peers
(the underlay addresses of the other nodes hosting the same tenant); the
tenants document's network quotas and the inventory's underlay address are
validated. The test acts as the agents."""

import ipaddress
import signal
import time

import allotd_fixture as fx
from allotd_fixture import Daemon, expect
from cli_fixture import cli, ok

dm = None
AG = None

TENANTS = {
    "version": 1,
    "priority_classes": [{"name": "inference", "value": 1000, "preemptible": False}],
    "tenants": [
        {"path": "nlp", "quotas": {"gpu": 8, "network": {
            "nominal": "1Gbit", "borrow_limit": "1Gbit", "egress": "nat"}}},
        {"path": "vision", "quotas": {"gpu": 8, "network": {
            "nominal": "500Mbit", "egress": "allow", "allow": ["192.0.2.0/24"]}}},
    ],
}


def node(name, underlay):
    return {"name": name, "cpus": 16, "memory": 65536, "gpus": [{"model": "L4"}],
            "underlay": underlay}


def beat(name, body=None, status=200):
    return fx.beat(dm, AG, name, body, status)


def get(jid):
    return fx.job(dm, jid)


def wait_state(jid, state, timeout=10):
    return fx.wait_job(dm, jid, state, timeout)


def submit(**kw):
    body = dict({"cpus": 1, "memory": 256, "gpus": 1, "command": ["true"]}, **kw)
    return expect(dm.req("POST", "/v1/jobs", body, token=dm.admin), 201)["id"]


def desired(name):
    """The node's desired state and VXLAN peers, as its agent gets them."""
    r = beat(name)
    return r["jobs"], r.get("network", {}).get("peers", {})


def test_bad_network_quotas_and_inventory():
    bad = [({"nominal": "fast"}, "nominal"), ({"borrow_limit": -1}, "borrow_limit"),
           ({"egress": "everywhere"}, "egress"), ({"egress": "allow", "allow": ["10.0.0.1/8"]},
                                                   "allow[0]"),
           ({"allow": ["10.0.0.0/8"]}, "only with egress"), ({"colour": 1}, "colour")]
    for net, word in bad:
        doc = {"version": 1, "tenants": [{"path": "x", "quotas": {"network": net}}]}
        e = expect(dm.req("PUT", "/v1/tenants", doc, token=dm.admin), 400, word)
        assert word in e["error"]["message"] and "quotas.network" in e["error"]["message"], e
    e = expect(dm.req("POST", "/v1/nodes/register", node("bad", "300.1.2.3"), token=AG), 400)
    assert "underlay" in e["error"]["message"], e
    e = expect(dm.req("POST", "/v1/nodes/register",
                      dict(node("bad", "198.18.0.9"), rdma=[{"vfs": 2}]), token=AG), 400)
    assert "rdma" in e["error"]["message"], e


def test_addresses_subnets_and_peers():
    gang = submit(tenant="nlp", tasks=2, priority="inference")
    solo = submit(tenant="vision")
    g = wait_state(gang, "starting")
    s = wait_state(solo, "starting")
    nodes = {t["node"] for t in g["placement"]["tasks"]}
    assert len(nodes) == 2, g
    addrs = [t["address"] for t in g["placement"]["tasks"]]
    nlp = ipaddress.ip_network(g["network"]["subnet"])
    vis = ipaddress.ip_network(s["network"]["subnet"])
    pool = ipaddress.ip_network("198.18.64.0/20")
    assert nlp.prefixlen == 26 and nlp.subnet_of(pool) and vis.subnet_of(pool), (nlp, vis)
    assert not nlp.overlaps(vis) and g["network"]["vni"] != s["network"]["vni"], (g, s)
    assert len(set(addrs)) == 2, addrs
    for a in addrs:
        assert ipaddress.ip_interface(a).ip in nlp and ipaddress.ip_interface(a).network == nlp
    assert g["network"]["gateway"] == str(nlp.network_address + 1), g
    # what the agents get
    vni = g["network"]["vni"]
    seen = {}
    for n in nodes:
        jobs, peers = desired(n)
        mine = [x for x in jobs if x["job"] == gang]
        assert len(mine) == 1, jobs
        net = mine[0]["network"]
        assert net["tenant"] == "nlp" and net["vni"] == vni and net["subnet"] == str(nlp), net
        assert net["address"] in addrs and net["gateway"] == g["network"]["gateway"], net
        assert net["egress"] == "nat" and net["allow"] == [], net
        assert net["rate"] == {"guarantee_bps": 10 ** 9, "ceil_bps": 2 * 10 ** 9}, net
        assert net["prio"] == 0 and net["exclusive"] is False, net
        other = [x for x in nodes if x != n][0]
        assert peers == {str(vni): [UNDERLAY[other]]}, (n, peers)
        # where the gang's tasks run, by task index, for them to meet
        assert mine[0]["task_hosts"] == {
            "nodes": ",".join(t["node"] for t in g["placement"]["tasks"]),
            "addresses": ",".join(a.split("/")[0] for a in addrs)}, mine[0]
        seen[n] = net["address"]
    assert sorted(seen.values()) == sorted(addrs)
    jobs, peers = desired(s["placement"]["tasks"][0]["node"])
    assert "task_hosts" not in [x for x in jobs if x["job"] == solo][0]  # one task
    v = [x for x in jobs if x["job"] == solo][0]["network"]
    assert v["egress"] == "allow" and v["allow"] == ["192.0.2.0/24"], v
    assert v["rate"] == {"guarantee_bps": 5 * 10 ** 8, "ceil_bps": 0}, v
    assert peers == {str(s["network"]["vni"]): []}, peers  # alone: no VXLAN peer
    r = ok(cli(dm, "show", str(gang)))
    assert "network:" in r.out and str(nlp) in r.out and addrs[0] in r.out, r.out


def test_restart_keeps_networks_and_addresses():
    global dm
    before = {j["id"]: get(j["id"]) for j in
              expect(dm.req("GET", "/v1/jobs?state=starting", token=dm.admin), 200)["jobs"]}
    assert len(before) == 2, before
    port, admin = dm.port, dm.admin
    dm.stop(signal.SIGKILL)
    dm = Daemon(dm.dir, args=["--listen", "127.0.0.1:%d" % port] + ARGS)
    dm.admin = admin
    for jid, j in before.items():
        after = get(jid)
        assert after["placement"] == j["placement"] and after["network"] == j["network"], jid
    # a new job of the same tenant takes another address, in the same subnet
    gang = [j for j in before.values() if j["tenant"] == "nlp"][0]
    for x in gang["placement"]["tasks"]:  # the gang's nodes report it running
        beat(x["node"], {"jobs": [{"id": gang["id"], "state": "running"}]})
    expect(dm.req("POST", "/v1/nodes/register", node("n-4", "198.18.0.5"), token=AG), 201)
    jid = submit(tenant="nlp")
    j = wait_state(jid, "starting")
    addr = j["placement"]["tasks"][0]["address"]
    assert addr not in [t["address"] for t in gang["placement"]["tasks"]], (addr, gang)
    assert j["network"]["subnet"] == gang["network"]["subnet"], j
    # the gang's nodes and the new one now peer with each other for nlp
    _, peers = desired("n-4")
    vni = str(gang["network"]["vni"])
    assert sorted(peers[vni]) == sorted(UNDERLAY[x["node"]]
                                        for x in gang["placement"]["tasks"]), peers
    # an ended job's address is free again
    expect(dm.req("POST", "/v1/jobs/%d/cancel" % jid, token=dm.admin), 200)
    time.sleep(0.5)
    expect(dm.req("POST", "/v1/nodes/n-4/heartbeat", {}, token=AG), 200)
    j2 = wait_state(submit(tenant="nlp"), "starting")
    assert j2["placement"]["tasks"][0]["address"] == addr, (j2, addr)


def test_traffic_per_tenant_in_metrics():
    nets = {}
    for j in expect(dm.req("GET", "/v1/jobs?state=starting", token=dm.admin), 200)["jobs"]:
        nets[j["tenant"]] = get(j["id"])["network"]["vni"]
    beat("n-1", {"usage": {"net": [{"vni": nets["nlp"], "rx_bytes": 1000, "tx_bytes": 2000}]}})
    beat("n-2", {"usage": {"net": [{"vni": nets["nlp"], "rx_bytes": 500, "tx_bytes": 0},
                                   {"vni": nets["vision"], "rx_bytes": 7, "tx_bytes": 9}]}})
    st, m = dm.req("GET", "/metrics", raw=True)
    assert 'allot_tenant_network_receive_bytes_total{tenant="nlp"} 1500\n' in m, m
    assert 'allot_tenant_network_transmit_bytes_total{tenant="nlp"} 2000\n' in m, m
    assert 'allot_tenant_network_transmit_bytes_total{tenant="vision"} 9\n' in m, m
    # a count that went down (its agent restarted, or the tenant's links on
    # the node went away and came back) and a node that no longer lists the
    # network: the tenant's counters never go down
    beat("n-1", {"usage": {"net": [{"vni": nets["nlp"], "rx_bytes": 200, "tx_bytes": 0}]}})
    beat("n-2", {"usage": {"net": [{"vni": nets["vision"], "rx_bytes": 7, "tx_bytes": 9}]}})
    st, m = dm.req("GET", "/metrics", raw=True)
    assert 'allot_tenant_network_receive_bytes_total{tenant="nlp"} 1700\n' in m, m
    assert 'allot_tenant_network_transmit_bytes_total{tenant="nlp"} 2000\n' in m, m
    assert 'allot_tenant_network_transmit_bytes_total{tenant="vision"} 9\n' in m, m
    e = beat("n-1", {"usage": {"net": [{"vni": 0, "rx_bytes": 1, "tx_bytes": 1}]}}, 400)
    assert "usage.net[0]" in e["error"]["message"], e


def test_full_subnet_keeps_jobs_pending():
    """A job whose tenant's subnet has no address left for it does not
    start outside its network: it waits, saying why, and starts once
    addresses are free again."""
    d = Daemon(args=["--network", "on", "--net-pool", "198.18.80.0/24", "--net-prefix", "29"])
    try:
        expect(d.req("PUT", "/v1/tenants", TENANTS, token=d.admin), 200)
        ag = d.token("agent", "", "agents")
        expect(d.req("POST", "/v1/nodes/register", node("s-1", "198.18.0.9"), token=ag), 201)
        # a node with no task yet hears that tenant networks are on (its agent then
        # refuses a task sent without one)
        assert fx.beat(d, ag, "s-1")["network"] == {"peers": {}}

        def sub(tasks):
            body = {"tenant": "nlp", "tasks": tasks, "cpus": 1, "memory": 64, "command": ["true"]}
            return expect(d.req("POST", "/v1/jobs", body, token=d.admin), 201)["id"]

        # a /29 holds 5 tasks' addresses (8 less the network, gateway, broadcast)
        first = fx.wait_job(d, sub(4), "starting")
        addrs = {t["address"] for t in first["placement"]["tasks"]}
        assert len(addrs) == 4, first
        second = sub(2)
        end = time.time() + 10
        j = fx.job(d, second)
        while time.time() < end and "network" not in (j.get("pending_reason") or ""):
            time.sleep(0.05)
            j = fx.job(d, second)
        assert j["state"] == "pending" and j["placement"] is None, j
        assert j["pending_reason"].startswith(
            "waiting for 2 addresses in tenant nlp's network: 1 of 5 free in its subnet"), j
        jobs = fx.beat(d, ag, "s-1")["jobs"]
        assert {x["job"] for x in jobs} == {first["id"]}, jobs
        assert all(x["network"]["address"] in addrs for x in jobs), jobs
        # too many tasks for any subnet: refused at once
        body = {"tenant": "nlp", "tasks": 6, "cpus": 1, "memory": 64, "command": ["true"]}
        err = expect(d.req("POST", "/v1/jobs", body, token=d.admin), 422)
        assert "a tenant's network holds 5 addresses" in err["error"]["message"], err
        # the first ends: the second starts, in the subnet
        expect(d.req("POST", "/v1/jobs/%d/cancel" % first["id"], token=d.admin), 200)
        j = fx.wait_job(d, second, "starting")
        net = ipaddress.ip_network(j["network"]["subnet"])
        assert all(ipaddress.ip_interface(t["address"]).ip in net
                   for t in j["placement"]["tasks"]), j
    finally:
        d.stop()


def test_new_net_prefix_cuts_networks_anew():
    """allotd restarted with another --net-prefix: tenants get new networks whose VXLAN
    ids and addresses are none of the stored ones (their tasks may still run), and the
    loop keeps committing (it stopped for good when a new network took a stored id)."""
    args = ["--network", "on", "--net-pool", "198.18.96.0/22"]
    d = Daemon(args=args + ["--net-prefix", "26"])
    try:
        expect(d.req("PUT", "/v1/tenants", TENANTS, token=d.admin), 200)
        ag = d.token("agent", "", "agents")
        expect(d.req("POST", "/v1/nodes/register", node("p-1", "198.18.0.12"), token=ag), 201)

        def sub(tenant):
            body = {"tenant": tenant, "cpus": 1, "memory": 64, "command": ["true"]}
            return expect(d.req("POST", "/v1/jobs", body, token=d.admin), 201)["id"]

        old = fx.wait_job(d, sub("nlp"), "starting")["network"]
        admin = d.admin
        d.stop()
        d = Daemon(d.dir, args=args + ["--net-prefix", "27"])
        d.admin = admin
        fx.beat(d, ag, "p-1")
        new = {t: fx.wait_job(d, sub(t), "starting")["network"] for t in ("vision", "nlp")}
        was = ipaddress.ip_network(old["subnet"])
        for t, net in new.items():
            sub_net = ipaddress.ip_network(net["subnet"])
            assert sub_net.prefixlen == 27 and not sub_net.overlaps(was), (t, net, old)
            assert net["vni"] != old["vni"], (t, net, old)
        assert new["vision"]["vni"] != new["nlp"]["vni"], new
        assert not ipaddress.ip_network(new["vision"]["subnet"]).overlaps(
            ipaddress.ip_network(new["nlp"]["subnet"])), new
        # a restart keeps the new ones (nlp's replaced its old one in the store)
        d.stop()
        d = Daemon(d.dir, args=args + ["--net-prefix", "27"])
        d.admin = admin
        fx.beat(d, ag, "p-1")
        assert fx.wait_job(d, sub("nlp"), "starting")["network"]["subnet"] == \
            new["nlp"]["subnet"]
        # the first job still runs in the old subnet, whose stored row is gone: a new
        # tenant's network stays clear of it all the same
        doc = dict(TENANTS, tenants=TENANTS["tenants"] + [{"path": "third"}])
        expect(d.req("PUT", "/v1/tenants", doc, token=d.admin), 200)
        third = ipaddress.ip_network(fx.wait_job(d, sub("third"), "starting")["network"]["subnet"])
        assert not third.overlaps(was), (third, was)
    finally:
        d.stop()


def test_huge_rates_saturate():
    """A nominal and borrow limit near the largest rate add up to the largest ceiling,
    not to a negative one that every agent would refuse."""
    big = 9000000000000000000
    doc = dict(TENANTS, tenants=TENANTS["tenants"] + [
        {"path": "huge", "quotas": {"network": {"nominal": big, "borrow_limit": big}}}])
    expect(dm.req("PUT", "/v1/tenants", doc, token=dm.admin), 200)
    jid = submit(tenant="huge", gpus=0)
    j = wait_state(jid, "starting")
    jobs, _ = desired(j["placement"]["tasks"][0]["node"])
    net = [x for x in jobs if x["job"] == jid][0]["network"]
    assert net["rate"] == {"guarantee_bps": big, "ceil_bps": 2 ** 63 - 1}, net


UNDERLAY = {"n-1": "198.18.0.2", "n-2": "198.18.0.3", "n-3": "198.18.0.4", "n-4": "198.18.0.5"}
ARGS = ["--network", "on", "--net-pool", "198.18.64.0/20", "--net-prefix", "26"]

if __name__ == "__main__":
    dm = Daemon(args=ARGS)
    try:
        expect(dm.req("PUT", "/v1/tenants", TENANTS, token=dm.admin), 200)
        AG = dm.token("agent", "", "agents")
        for n in ("n-1", "n-2", "n-3"):
            expect(dm.req("POST", "/v1/nodes/register", node(n, UNDERLAY[n]), token=AG), 201)
        fx.run([test_bad_network_quotas_and_inventory, test_addresses_subnets_and_peers,
                test_restart_keeps_networks_and_addresses, test_traffic_per_tenant_in_metrics,
                test_huge_rates_saturate, test_full_subnet_keeps_jobs_pending,
                test_new_net_prefix_cuts_networks_anew])
    finally:
        dm.stop()
