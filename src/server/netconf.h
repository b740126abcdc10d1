/*
 * Tenant network settings (netconf.c): the `network` entry of a tenant's
 * quotas ({nominal, borrow_limit, egress, allow}), bandwidths and IPv4
 * CIDRs. Pure functions; docs/network.md describes the format.
 */
#ifndef ALLOT_SERVER_NETCONF_H
#define ALLOT_SERVER_NETCONF_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A tenant's network quota and egress policy, parsed. */
struct netconf {
    int64_t nominal_bps; /* guaranteed rate; 0 = none */
    int64_t ceil_bps;    /* nominal + borrow limit; 0 = no ceiling */
    const char *egress;  /* "off", "nat" or "allow" (static) */
    json_t *allow;       /* borrowed array of CIDR strings, or NULL */
};

/* "10Gbit", "500Mbit", "1.5Gbit", "800Kbit", "100bit" or a plain integer
 * (bits per second); "unlimited" only where allow_unlimited (gives 0).
 * Returns false on anything else or on overflow. */
bool netconf_rate(json_t *v, bool allow_unlimited, int64_t *bps);

/* "A.B.C.D/N" with the host bits zero (a network) when `network`. */
bool netconf_cidr(const char *s, bool network, uint32_t *addr, int *prefix);

/* Checks a quotas.network object; writes why into err. */
bool netconf_check(json_t *net, char *err, size_t errlen);

/* Reads a checked quotas.network object (NULL: defaults: no rates, egress
 * off). */
void netconf_parse(json_t *net, struct netconf *out);

/* Formats addr/prefix ("198.18.16.5/24"); addr alone when prefix < 0. */
void netconf_fmt(uint32_t addr, int prefix, char *buf, size_t len);

#endif
