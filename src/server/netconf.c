/*
 * Tenant network settings (see netconf.h).
 */
#include "netconf.h"

#include "allot/common.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

bool netconf_rate(json_t *v, bool allow_unlimited, int64_t *bps)
{
    static const struct {
        const char *unit;
        double mul;
    } units[] = {{"bit", 1}, {"kbit", 1e3}, {"mbit", 1e6}, {"gbit", 1e9}, {"tbit", 1e12}};
    const char *s;
    char *end;
    double x;

    if (json_is_integer(v)) {
        if (json_integer_value(v) < 0)
            return false;
        *bps = json_integer_value(v);
        return true;
    }
    if (!(s = json_string_value(v)))
        return false;
    if (allow_unlimited && !strcmp(s, "unlimited")) {
        *bps = 0;
        return true;
    }
    if (!isdigit((unsigned char)*s))
        return false;
    x = strtod(s, &end);
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
        if (!strcasecmp(end, units[i].unit)) {
            x *= units[i].mul;
            if (!(x >= 0 && x < 9e18))
                return false;
            *bps = (int64_t)x;
            return true;
        }
    return false;
}

bool netconf_cidr(const char *s, bool network, uint32_t *addr, int *prefix)
{
    unsigned a, b, c, d;
    int p, n = 0;

    if (!s || sscanf(s, "%3u.%3u.%3u.%3u/%2d%n", &a, &b, &c, &d, &p, &n) != 5 || s[n] || a > 255 ||
        b > 255 || c > 255 || d > 255 || p < 0 || p > 32)
        return false;
    *addr = a << 24 | b << 16 | c << 8 | d;
    *prefix = p;
    if (network && p < 32 && (*addr & (p ? ~(0xffffffffu << (32 - p)) : 0xffffffffu)))
        return false;
    return true;
}

void netconf_fmt(uint32_t addr, int prefix, char *buf, size_t len)
{
    if (prefix >= 0)
        allot_fmt(buf, len, "%u.%u.%u.%u/%d", addr >> 24, addr >> 16 & 255, addr >> 8 & 255,
                  addr & 255, prefix);
    else
        allot_fmt(buf, len, "%u.%u.%u.%u", addr >> 24, addr >> 16 & 255, addr >> 8 & 255,
                  addr & 255);
}

bool netconf_check(json_t *net, char *err, size_t errlen)
{
    static const char *const fields[] = {"nominal", "borrow_limit", "egress", "allow", NULL};
    const char *k, *eg;
    json_t *v;
    int64_t bps;
    size_t i;

    if (!json_is_object(net))
        return allot_fmt(err, errlen, "must be an object {nominal, borrow_limit, egress, allow}"),
               false;
    json_object_foreach(net, k, v)
    {
        bool ok = false;
        for (const char *const *f = fields; *f; f++)
            ok |= !strcmp(*f, k);
        if (!ok)
            return allot_fmt(err, errlen, "unknown field \"%s\"", k), false;
    }
    if ((v = json_object_get(net, "nominal")) && !netconf_rate(v, false, &bps))
        return allot_fmt(err, errlen, "nominal: a rate such as 10Gbit, 500Mbit or bits per second"),
               false;
    if ((v = json_object_get(net, "borrow_limit")) && !netconf_rate(v, true, &bps))
        return allot_fmt(err, errlen, "borrow_limit: a rate such as 10Gbit, or unlimited"), false;
    eg = json_string_value(json_object_get(net, "egress"));
    if (json_object_get(net, "egress") &&
        (!eg || (strcmp(eg, "off") != 0 && strcmp(eg, "nat") != 0 && strcmp(eg, "allow") != 0)))
        return allot_fmt(err, errlen, "egress: off, nat or allow"), false;
    v = json_object_get(net, "allow");
    if (v && (!json_is_array(v) || json_array_size(v) > ALLOT_NET_MAX_ALLOW))
        return allot_fmt(err, errlen, "allow: a list of at most %d IPv4 networks (CIDR)",
                         ALLOT_NET_MAX_ALLOW),
               false;
    json_t *x;
    json_array_foreach(v, i, x)
    {
        uint32_t a;
        int p;
        if (!netconf_cidr(json_string_value(x), true, &a, &p))
            return allot_fmt(err, errlen, "allow[%zu]: an IPv4 network such as 10.1.0.0/16", i),
                   false;
    }
    if (v && json_array_size(v) && (!eg || strcmp(eg, "allow") != 0))
        return allot_fmt(err, errlen, "allow: only with egress: allow"), false;
    return true;
}

void netconf_parse(json_t *net, struct netconf *out)
{
    int64_t borrow = 0;
    const char *eg = json_string_value(json_object_get(net, "egress"));

    memset(out, 0, sizeof(*out));
    out->egress = !eg ? "off" : !strcmp(eg, "nat") ? "nat" : !strcmp(eg, "allow") ? "allow" : "off";
    out->allow = json_object_get(net, "allow");
    if (!netconf_rate(json_object_get(net, "nominal"), false, &out->nominal_bps))
        out->nominal_bps = 0;
    if (json_object_get(net, "borrow_limit") &&
        netconf_rate(json_object_get(net, "borrow_limit"), true, &borrow) && borrow > 0)
        out->ceil_bps = borrow > INT64_MAX - out->nominal_bps ? INT64_MAX /* saturated */
                                                              : out->nominal_bps + borrow;
    /* no borrow limit, or unlimited: no ceiling */
}
