/*
 * The agent's tenant networks without touching the machine's network
 * (src/agent/net.c, net_rules.c, net_sys.c): the "network" object of a
 * desired-state entry parsed and refused field by field, rates, the
 * per-tenant view the rules are built from, the nftables ruleset and the
 * tc batch text for a registry made by hand, and those builders under
 * failing allocations. What they do to a real node is
 * tests/integration/test_network.py.
 */
#include "net_int.h"

#include "allot/common.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

static const char *NET_A =
    "{\"tenant\": \"research/nlp\", \"vni\": 4097, \"subnet\": \"198.18.16.0/24\", "
    "\"address\": \"198.18.16.10/24\", \"gateway\": \"198.18.16.1\", \"egress\": \"nat\", "
    "\"allow\": [], \"rate\": {\"guarantee_bps\": 20000000, \"ceil_bps\": 80000000}, "
    "\"prio\": 0, \"exclusive\": false}";

static json_t *load(const char *text)
{
    json_t *j = json_loads(text, 0, NULL);
    assert_non_null(j);
    return j;
}

static void test_parse_ok(void **state)
{
    struct net_spec s;
    char err[256] = "";
    json_t *j = load(NET_A);

    (void)state;
    assert_int_equal(net_parse(j, &s, err, sizeof(err)), 0);
    assert_string_equal(s.tenant, "research/nlp");
    assert_int_equal(s.vni, 4097);
    assert_string_equal(s.subnet, "198.18.16.0/24");
    assert_string_equal(s.address, "198.18.16.10/24");
    assert_string_equal(s.gateway, "198.18.16.1");
    assert_string_equal(s.egress, "nat");
    assert_int_equal(s.guarantee_bps, 20000000);
    assert_int_equal(s.ceil_bps, 80000000);
    assert_int_equal(s.prio, 0);
    assert_false(s.exclusive);
    json_decref(j);
    /* the least allotd may send: egress off, no rates, priority 0 */
    j = load("{\"tenant\": \"t\", \"vni\": 1, \"subnet\": \"10.0.0.0/8\", "
             "\"address\": \"10.0.0.2/8\", \"gateway\": \"10.0.0.1\", "
             "\"allow\": [\"192.0.2.0/24\", \"203.0.113.7\"], \"exclusive\": true}");
    assert_int_equal(net_parse(j, &s, err, sizeof(err)), 0);
    assert_string_equal(s.egress, "off");
    assert_int_equal(s.guarantee_bps, 0);
    assert_int_equal(s.n_allow, 2);
    assert_string_equal(s.allow[1], "203.0.113.7");
    assert_true(s.exclusive);
    json_decref(j);
}

/* The allow list holds as many CIDRs as allotd lets a tenant file name
 * (one limit: ALLOT_NET_MAX_ALLOW), and not one more. */
static void test_parse_allow_limit(void **state)
{
    struct net_spec s;
    char err[256];
    json_t *j = load(NET_A), *allow = json_array();

    (void)state;
    for (int i = 0; i < ALLOT_NET_MAX_ALLOW; i++) {
        char c[32];
        allot_fmt(c, sizeof(c), "192.0.%d.0/24", i);
        json_array_append_new(allow, json_string(c));
    }
    json_object_set(j, "allow", allow);
    assert_int_equal(net_parse(j, &s, err, sizeof(err)), 0);
    assert_int_equal(s.n_allow, 64);
    assert_string_equal(s.allow[63], "192.0.63.0/24");
    json_array_append_new(allow, json_string("192.0.64.0/24"));
    assert_int_equal(net_parse(j, &s, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "network.allow[64]"));
    json_decref(allow);
    json_decref(j);
}

static void test_parse_refused(void **state)
{
    static const struct {
        const char *field, *value, *word;
    } bad[] = {
        {"vni", "0", "network.vni"},
        {"vni", "16777216", "network.vni"},
        {"vni", "\"4097\"", "network.vni"},
        {"subnet", "\"198.18.16.0\"", "network.subnet"},
        {"subnet", "\"198.18.16.0/33\"", "network.subnet"},
        {"address", "\"198.18.16.300/24\"", "network.address"},
        {"address", "\"x/24\"", "network.address"},
        {"gateway", "\"198.18.16\"", "network.gateway"},
        {"gateway", "null", "network.gateway"},
        {"subnet", "\"0.0.0.0/0\"", "network.subnet"},
        {"subnet", "\"198.18.16.0/31\"", "network.subnet"},
        {"address", "\"198.18.17.10/24\"", "network.address"},
        {"address", "\"198.18.16.10/25\"", "network.address"},
        {"address", "\"198.18.16.1/24\"", "network.address"},
        {"gateway", "\"198.18.17.1\"", "network.gateway"},
        {"tenant", "\"\"", "network.tenant"},
        {"egress", "\"everywhere\"", "network.egress"},
        {"allow", "[\"10.0.0.0/40\"]", "network.allow[0]"},
        {"allow", "[1]", "network.allow[0]"},
        {"rate", "{\"guarantee_bps\": -1}", "network.rate"},
        {"prio", "8", "network.prio"},
        {"prio", "-1", "network.prio"},
        {"prio", "\"0\"", "network.prio"},
    };
    struct net_spec s;
    char err[256];

    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        json_t *j = load(NET_A);
        json_object_set_new(j, bad[i].field, json_loads(bad[i].value, JSON_DECODE_ANY, NULL));
        err[0] = '\0';
        assert_int_equal(net_parse(j, &s, err, sizeof(err)), -1);
        if (!strstr(err, bad[i].word))
            fail_msg("%s=%s: \"%s\" does not name %s", bad[i].field, bad[i].value, err,
                     bad[i].word);
        json_decref(j);
    }
    json_t *arr = json_array();
    assert_int_equal(net_parse(arr, &s, err, sizeof(err)), -1);
    assert_int_equal(net_parse(NULL, &s, err, sizeof(err)), -1);
    json_decref(arr);
}

static void test_rates(void **state)
{
    (void)state;
    assert_int_equal(net_parse_rate("10Gbit"), 10000000000LL);
    assert_int_equal(net_parse_rate("200Mbit"), 200000000);
    assert_int_equal(net_parse_rate("1500kbit"), 1500000);
    assert_int_equal(net_parse_rate("1.5gbit"), 1500000000);
    assert_int_equal(net_parse_rate("123"), 123);
    assert_int_equal(net_parse_rate("fast"), -1);
    assert_int_equal(net_parse_rate("10Gbyte"), -1);
    assert_int_equal(net_parse_rate(""), -1);
    assert_int_equal(net_parse_rate("-1"), -1);
    assert_int_equal(net_parse_rate(NULL), -1);
}

/* A registry by hand: node-a (198.18.0.2 on eth0, 198.18.0.0/24, 200 Mbit/s). */
static struct net *registry(const char *peers)
{
    struct net *n = allot_calloc(1, sizeof(*n));

    assert_non_null(n);
    allot_strlcpy(n->node, "node-a", sizeof(n->node));
    allot_strlcpy(n->underlay, "198.18.0.2", sizeof(n->underlay));
    allot_strlcpy(n->uplink, "eth0", sizeof(n->uplink));
    allot_strlcpy(n->uplink_nets[0], "198.18.0.0/24", sizeof(n->uplink_nets[0]));
    n->n_uplink_nets = 1;
    n->uplink_bps = 200000000;
    n->mtu = 1500;
    n->peers = load(peers);
    return n;
}

/* Adds task KEY with NET_A edited by the pairs (field, JSON value), NULL-ended. */
static void add_task(struct net *n, const char *key, ...)
{
    json_t *j = load(NET_A);
    struct net_entry e = {0};
    char err[256];
    const char *f;
    va_list ap;

    va_start(ap, key);
    while ((f = va_arg(ap, const char *)))
        json_object_set_new(j, f, json_loads(va_arg(ap, const char *), JSON_DECODE_ANY, NULL));
    va_end(ap);
    allot_strlcpy(e.key, key, sizeof(e.key));
    net_ns_name(key, e.ns, sizeof(e.ns));
    assert_int_equal(net_parse(j, &e.s, err, sizeof(err)), 0);
    json_decref(j);
    assert_int_equal(allot_grow((void **)&n->e, &n->cap, n->n + 1, sizeof(*n->e)), 0);
    n->e[n->n++] = e;
}

/* Tenants A (4097, nat, two priorities), B (4098, allow), C (4099, off, exclusive). */
static struct net *three_tenants(void)
{
    struct net *n = registry("{\"4097\": [\"198.18.0.3\", \"198.18.0.2\", \"bad\"], "
                             "\"4098\": [], \"4099\": [\"198.18.0.4\", \"198.18.0.5\"]}");

    add_task(n, "7-0", NULL);
    add_task(n, "7-1", "address", "\"198.18.16.11/24\"", "prio", "3", "rate",
             "{\"guarantee_bps\": 30000000, \"ceil_bps\": 60000000}", NULL);
    add_task(n, "9-0", "tenant", "\"vision\"", "vni", "4098", "subnet", "\"198.18.17.0/24\"",
             "address", "\"198.18.17.10/24\"", "gateway", "\"198.18.17.1\"", "egress", "\"allow\"",
             "allow", "[\"192.0.2.0/24\", \"198.18.0.1/32\"]", "rate",
             "{\"guarantee_bps\": 0, \"ceil_bps\": 0}", "prio", "1", NULL);
    add_task(n, "11-0", "tenant", "\"search\"", "vni", "4099", "subnet", "\"198.18.18.0/24\"",
             "address", "\"198.18.18.10/24\"", "gateway", "\"198.18.18.1\"", "egress", "\"off\"",
             "exclusive", "true", NULL);
    return n;
}

static void test_tenants(void **state)
{
    struct net *n = three_tenants();
    struct net_tenant *t;

    (void)state;
    assert_int_equal(net_tenants(n, &t), 3);
    assert_int_equal(t[0].vni, 4097);
    assert_int_equal(t[0].guarantee_bps, 30000000); /* the largest its tasks carry */
    assert_int_equal(t[0].ceil_bps, 80000000);
    assert_int_equal(t[0].prios, (1u << 0) | (1u << 3));
    assert_int_equal(t[0].minor, 0x10);
    assert_int_equal(t[1].vni, 4098);
    assert_int_equal(t[1].minor, 0x20);
    assert_int_equal(t[2].vni, 4099);
    assert_true(t[2].exclusive);
    allot_free(t);
    net_free(n);
}

#define HAS(text, s)                                                                               \
    do {                                                                                           \
        if (!strstr(text, s))                                                                      \
            fail_msg("missing: %s\nin:\n%s", s, text);                                             \
    } while (0)

static void test_nft_text(void **state)
{
    struct net *n = three_tenants();
    struct net_tenant *t;
    char err[128];

    (void)state;
    /* --dc-nets: more of the data centre; each entry a prefix */
    assert_int_equal(net_dc_nets_add(n, "10.1.2.3/8", err, sizeof(err)), 0);
    assert_int_equal(net_dc_nets_add(n, "172.16.0.0/12,10.0.0.1", err, sizeof(err)), -1);
    assert_non_null(strstr(err, "\"10.0.0.1\" is not an IPv4 prefix"));
    assert_int_equal(net_dc_nets_add(n, "x/8", err, sizeof(err)), -1);
    n->n_uplink_nets = 2; /* the refused list's good entry is dropped with it */
    int nt = net_tenants(n, &t);
    char *x = net_nft_text(n, t, nt);
    assert_non_null(x);
    HAS(x, "table inet allot\ndelete table inet allot\ntable inet allot {\n");
    /* VXLAN of a VNI from its peers only (not this node, not a bad address) */
    HAS(x, "udp dport 4789 @th,96,24 4097 ip saddr != { 198.18.0.3 } counter drop\n");
    HAS(x, "udp dport 4789 @th,96,24 4098 counter drop\n");
    HAS(x, "udp dport 4789 @th,96,24 4099 ip saddr != { 198.18.0.4, 198.18.0.5 } counter drop\n");
    /* the node: the gateway's ping only */
    HAS(x, "iifname \"alb-4097\" ip daddr 198.18.16.1 icmp type echo-request accept\n");
    HAS(x, "iifname \"alb-*\" counter drop\n  }\n");
    /* forward: each bridge to itself; nat out but not into the data centre; allow: its list */
    HAS(x, "iifname \"alb-4099\" oifname \"alb-4099\" accept\n");
    HAS(x, "iifname \"alb-*\" oifname \"eth0\" udp dport 4789 counter drop\n");
    HAS(x, "iifname \"alb-4097\" oifname \"eth0\" ip saddr 198.18.16.0/24 ip daddr != { "
           "198.18.0.0/24, 10.0.0.0/8 } meta priority set ip saddr map { 198.18.16.10 : a110:11, "
           "198.18.16.11 : a110:14 } accept\n");
    HAS(x, "iifname \"alb-4098\" oifname \"eth0\" ip saddr 198.18.17.0/24 ip daddr { "
           "192.0.2.0/24, 198.18.0.1/32 } meta priority set ip saddr map { 198.18.17.10 : "
           "a110:22 } accept\n");
    assert_null(strstr(x, "iifname \"alb-4099\" oifname \"eth0\""));
    HAS(x, "iifname \"alb-*\" counter drop\n    oifname \"alb-*\" counter drop\n");
    HAS(x, "oifname \"eth0\" ip saddr 198.18.16.0/24 masquerade\n");
    HAS(x, "oifname \"eth0\" ip saddr 198.18.17.0/24 masquerade\n");
    assert_null(strstr(x, "198.18.18.0/24 masquerade"));
    allot_free(x);
    allot_free(t);
    net_free(n);
}

static void test_tc_text(void **state)
{
    struct net *n = three_tenants();
    struct net_tenant *t;
    int nt = net_tenants(n, &t);
    char *x = net_tc_text(n, t, nt);

    (void)state;
    assert_non_null(x);
    HAS(x, "qdisc replace dev eth0 root handle a110: htb default ffff\n");
    HAS(x, "class add dev eth0 parent a110: classid a110:1 htb rate 200000000bit");
    /* A: its guarantee and ceiling, a leaf per priority sharing the guarantee */
    HAS(x, "parent a110:1 classid a110:10 htb rate 30000000bit burst 18750 ceil 80000000bit");
    HAS(x, "parent a110:10 classid a110:11 htb rate 15000000bit");
    HAS(x, "prio 0 quantum");
    HAS(x, "parent a110:10 classid a110:14 htb rate 15000000bit");
    /* B: no guarantee (a token rate), no ceiling but the link */
    HAS(x, "classid a110:20 htb rate 8000bit burst 1600 ceil 200000000bit");
    /* C: exclusive, the whole link */
    HAS(x, "classid a110:30 htb rate 200000000bit burst 125000 ceil 200000000bit");
    /* overlay packets by VNI (0x1001 << 8) and inner source 198.18.16.11 = c612:100b */
    HAS(x, "match u16 4789 0xffff at 22 match u32 0x00100100 0xffffff00 at 32 match u16 0xc612 "
           "0xffff at 62 match u16 0x100b 0xffff at 64 flowid a110:14\n");
    HAS(x, "prio 2 u32 match u8 17 0xff at 9 match u16 4789 0xffff at 22 match u32 0x00100200 "
           "0xffffff00 at 32 flowid a110:22\n");
    /* the rest: 1 % when the guarantees take it all */
    HAS(x, "classid a110:ffff htb rate 2000000bit");
    allot_free(x);
    allot_free(t);
    net_free(n);
}

/* Every allocation of the builders failing in turn: NULL or the whole text, no leak. */
static void test_builders_out_of_memory(void **state)
{
    struct net *n = three_tenants();
    struct net_tenant *t;
    int nt = net_tenants(n, &t);
    char *want_nft = net_nft_text(n, t, nt), *want_tc = net_tc_text(n, t, nt);
    bool done = false;

    (void)state;
    for (unsigned long k = 1; !done && k < 200; k++) {
        allot_alloc_fail_at(k, false);
        char *a = net_nft_text(n, t, nt), *b = net_tc_text(n, t, nt);
        struct net_tenant *t2 = NULL;
        int nt2 = net_tenants(n, &t2);
        done = allot_alloc_count() < k;
        allot_alloc_fail_at(0, false);
        if (a)
            assert_string_equal(a, want_nft);
        if (b)
            assert_string_equal(b, want_tc);
        assert_true(nt2 == 3 || (nt2 == -1 && !t2));
        allot_free(a);
        allot_free(b);
        allot_free(t2);
    }
    assert_true(done);
    allot_free(want_nft);
    allot_free(want_tc);
    allot_free(t);
    net_free(n);
}

static void test_changed(void **state)
{
    char *sig = NULL;

    (void)state;
    assert_true(net_changed(&sig, "a"));
    assert_false(net_changed(&sig, "a"));
    assert_true(net_changed(&sig, "b"));
    allot_free(sig);
}

/* net_run_json reads a tool's whole output however long (ip -j -s link
 * on a node with many links passes 1 MiB), and answers NULL for output
 * that is not JSON or a tool that fails. */
static void test_run_json_long_output(void **state)
{
    (void)state;
    char path[] = "/tmp/allot-test-net-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    assert_non_null(f);
    fputc('[', f);
    for (int i = 0; i < 60000; i++) /* about 2.4 MiB */
        fprintf(f, "%s{\"ifname\": \"veth%05d\", \"mtu\": 1500}", i ? "," : "", i);
    fputs("]\n", f);
    assert_int_equal(fclose(f), 0);
    json_t *j = net_run_json("cat %s", path);
    assert_non_null(j);
    assert_int_equal(json_array_size(j), 60000);
    assert_string_equal(json_string_value(json_object_get(json_array_get(j, 59999), "ifname")),
                        "veth59999");
    json_decref(j);

    f = fopen(path, "w");
    assert_non_null(f);
    fputs("not json\n", f);
    assert_int_equal(fclose(f), 0);
    assert_null(net_run_json("cat %s", path));
    unlink(path);
    assert_null(net_run_json("cat %s", path)); /* cat fails */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_ok),      cmocka_unit_test(test_parse_allow_limit),
        cmocka_unit_test(test_parse_refused), cmocka_unit_test(test_rates),
        cmocka_unit_test(test_tenants),       cmocka_unit_test(test_nft_text),
        cmocka_unit_test(test_tc_text),       cmocka_unit_test(test_builders_out_of_memory),
        cmocka_unit_test(test_changed),       cmocka_unit_test(test_run_json_long_output),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
