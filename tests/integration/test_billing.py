"""Invoices of a month whose prices changed in the middle, against a real allotd: each
line is priced by one version of the price book, so its rate times its hours is its
amount; and the versions that priced closed months cannot be rewritten. Metering writes
the hours of the present only, so last month's hourly roll-ups and the node that was up
all month are written into the store before allotd starts."""

import calendar
import csv
import io
import json
import os
import sqlite3
import time

import allotd_fixture as fx
from allotd_fixture import TENANTS, Daemon, expect
from cli_fixture import cli, fails, ok

dm = None
NOW = time.gmtime()
# last month, whatever this one is
PREV = "%04d-%02d" % ((NOW.tm_year, NOW.tm_mon - 1) if NOW.tm_mon > 1 else (NOW.tm_year - 1, 12))


DAYS = calendar.monthrange(*map(int, PREV.split("-")))[1]


def day(d, hour=0):
    """Unix seconds of day d of last month at hour (UTC)."""
    return calendar.timegm(time.strptime("%s-%02d %02d" % (PREV, d, hour), "%Y-%m-%d %H"))


# two versions in force last month: from the 1st and from the 16th
VERSIONS = [
    {"effective": PREV + "-01", "gpu_hour": {"H100-80GB": 3600}, "mig_hour": {"1g.10gb": 700},
     "fraction_markup_pct": 10, "cpu_core_hour": 36, "reserved_discount_pct": 20},
    {"effective": PREV + "-16", "gpu_hour": {"H100-80GB": 7200}, "fraction_markup_pct": 50,
     "cpu_core_hour": 36, "reserved_discount_pct": 20},
]
BOOK = {"currency": "EUR", "books": VERSIONS}


def rollup(hour, item, gpu_seconds, cpu_milli_s=0, tenant="research/nlp"):
    """A roll-up row as allotd writes it: nothing measured, so `bill: measured` would bill
    the allocated GPU time (the last column)."""
    return (hour, tenant, "admin", "H100-80GB", item, 0, int(gpu_seconds * 10 ** 6),
            cpu_milli_s, 0, 0, 0, -1, -1, 0, int(gpu_seconds * 10 ** 6))


def write_last_month(path):
    db = sqlite3.connect(path)
    rows = [
        # the 10th (first version): 2 GPU-hours whole, 1/7 GPU-hour of MIG 1g.10gb (one
        # instance-hour), 0.5 GPU-hour of fractions, 4 core-hours
        rollup(day(10, 12), "gpu", 7200, 4000 * 3600),
        rollup(day(10, 12), "mig:1g.10gb", 3600 / 7),
        rollup(day(10, 13), "fraction", 1800),
        # the 20th (second version): half a GPU-hour whole, 0.25 of fractions, 4 core-hours
        rollup(day(20, 12), "gpu", 1800, 4000 * 3600),
        rollup(day(20, 12), "fraction", 900),
    ]
    db.executemany("INSERT INTO usage_hourly(hour, tenant, user, model, item, borrowed,"
                   " gpu_ppm_s, cpu_milli_s, mem_mib_s, util_pct_ms, util_ms, gpu_mem_peak,"
                   " energy_mj, cpu_used_ms, gpu_bill_ppm_s) VALUES"
                   " (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", rows)
    inv = {"name": "p-1", "cpus": 16, "memory": 65536, "gpus": [{"model": "H100-80GB"}] * 2}
    db.execute("INSERT INTO node_spans(node, inventory, start_time, end_time) VALUES (?,?,?,?)",
               ("p-1", json.dumps(inv), day(1), day(DAYS) + 86400))
    db.commit()
    db.close()


def lines(inv, tenant="research/nlp"):
    return [x for t in inv["tenants"] if t["tenant"] == tenant for x in t["lines"]]


def test_lines_per_price_book_version():
    """A line is priced by one version: last month's hours before and after the 16th are
    two lines, each with its own rate, rate x hours = amount (to the rounding of the hours
    shown), also for MIG (a per-instance rate) and fractions (a markup)."""
    expect(dm.req("PUT", "/v1/pricebook", BOOK, token=dm.admin), 200)
    inv = expect(dm.req("GET", "/v1/invoices?period=" + PREV, token=dm.admin), 200)
    got = {(x["item"], x["kind"], x.get("price_book")): x for x in lines(inv)}
    v1, v2 = PREV + "-01", PREV + "-16"
    want = {
        # item, kind, version: hours, rate (minor per hour), amount
        ("gpu", "whole", v1): (2.0, 3600 * 0.8, 5760),
        ("gpu", "whole", v2): (0.5, 7200 * 0.8, 2880),
        ("gpu", "mig", v1): (1 / 7, 700 * 7 * 0.8, 560),  # 700 per instance-hour
        ("gpu", "fraction", v1): (0.5, 3600 * 1.1 * 0.8, 1584),
        ("gpu", "fraction", v2): (0.25, 7200 * 1.5 * 0.8, 2160),
        ("cpu", None, v1): (4.0, 36 * 0.8, 115),  # 115.2, rounded once
        ("cpu", None, v2): (4.0, 36 * 0.8, 115),
    }
    assert set(got) == set(want), got
    for k, (hours, rate, amount) in want.items():
        x = got[k]
        assert abs(x["hours"] - hours) < 1e-6, (k, x)
        assert abs(x["rate_minor"] - rate) < 1e-9, (k, x)
        assert x["amount_minor"] == amount, (k, x)
        assert abs(x["rate_minor"] * x["hours"] - amount) <= 0.5 + rate * 1e-6, (k, x)
    total = sum(a for _, _, a in want.values())
    assert inv["tenants"][0]["total_minor"] == total, inv
    # the cluster: 2 H100s and 16 cores all month, at list, each hour by its version
    hours1, hours2 = 15 * 24, (DAYS - 15) * 24
    cluster = hours1 * (2 * 3600 + 16 * 36) + hours2 * (2 * 7200 + 16 * 36)
    assert inv["cluster"]["amount_minor"] == cluster, inv
    assert inv["billed_minor"] + inv["unbilled"]["amount_minor"] == inv["cluster"]["amount_minor"]
    # CSV and HTML show the same lines, with the version that priced them
    st, text = dm.req("GET", "/v1/invoices?format=csv&period=" + PREV, token=dm.admin, raw=True)
    assert st == 200, text
    rows = list(csv.DictReader(io.StringIO(text)))
    priced = [r for r in rows if r["item"] not in ("total",)]
    assert len(priced) == len(want), text
    for r in priced:
        assert abs(float(r["rate_minor"]) * float(r["hours"]) - int(r["amount_minor"])) <= 1, r
        assert r["price_book"] in (v1, v2), r
    st, html = dm.req("GET", "/v1/invoices?format=html&period=" + PREV, token=dm.admin,
                      raw=True)
    assert st == 200 and html.count("<td>%s</td>" % v2) == 3, html
    r = ok(cli(dm, "invoice", "--period", PREV))
    assert "PRICES OF" in r.out and v2 in r.out, r.out



def invoice(period):
    return expect(dm.req("GET", "/v1/invoices?period=" + period, token=dm.admin), 200)


def put(book, status):
    return expect(dm.req("PUT", "/v1/pricebook", book, token=dm.admin), status)


def test_past_versions_stay():
    """Versions effective before this month (UTC) priced closed months: a book that changes
    or removes one, adds one, or changes the currency is refused with 409 naming it, and
    last month's invoice stays what it was. The same versions again (a new budget, a model
    spelt by an alias) are fine, and so is anything from this month on."""
    before = invoice(PREV)
    v2 = PREV + "-16"
    this_month = time.strftime("%Y-%m-01", NOW)
    changed = json.loads(json.dumps(BOOK))
    changed["books"][1]["gpu_hour"]["H100-80GB"] = 1
    added = json.loads(json.dumps(BOOK))
    added["books"].append(dict(VERSIONS[1], effective=PREV + "-20", cpu_core_hour=1))
    for book, word in ((changed, v2), (dict(BOOK, books=VERSIONS[:1]), v2),
                       (added, PREV + "-20"), (dict(BOOK, currency="USD"), "currency")):
        e = put(book, 409)
        assert word in e["error"]["message"] and this_month in e["error"]["message"], e
    r = fails(cli(dm, "pricebook", "apply", "-f", "-", stdin=json.dumps(changed)), 4,
              "conflict")
    assert v2 in r.err, r
    assert expect(dm.req("GET", "/v1/pricebook", token=dm.admin), 200) == BOOK
    assert invoice(PREV) == before
    # the same versions: a budget, a model by its alias
    alias = json.loads(json.dumps(BOOK))
    alias["books"][0]["gpu_hour"] = {"H100": 3600}
    put(dict(alias, budgets={"research/nlp": {"monthly_minor": 10 ** 6}}), 200)
    # from this month on, versions come, change and go
    later = dict(BOOK, books=VERSIONS + [{"effective": this_month, "gpu_hour": {"H100-80GB": 1}}])
    put(later, 200)
    later["books"][2]["gpu_hour"]["H100-80GB"] = 2
    assert put(later, 200)["books"][2]["gpu_hour"] == {"H100-80GB": 2}
    put(BOOK, 200)
    assert invoice(PREV) == before


def test_example_applies():
    """etc/pricebook.example.yaml applies to an allotd without a price book (a first book
    may start in the past: no month was invoiced before it)."""
    other = Daemon()
    try:
        ok(cli(other, "pricebook", "apply", "-f",
               os.path.join(fx.SOURCE, "etc", "pricebook.example.yaml")))
        shown = ok(cli(other, "-o", "json", "pricebook")).json()
        assert [b["effective"] for b in shown["books"]] == ["2026-01-01", "2026-12-01"], shown
    finally:
        other.stop()


if __name__ == "__main__":
    d = fx.tempdir()
    admin = fx.init(d)
    write_last_month(os.path.join(d, "allot.db"))
    dm = Daemon(data_dir=d)
    dm.admin = admin
    try:
        expect(dm.req("PUT", "/v1/tenants", TENANTS, token=dm.admin), 200)
        fx.run([test_lines_per_price_book_version, test_past_versions_stay,
                test_example_applies])
    finally:
        dm.stop()
