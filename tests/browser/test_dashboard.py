"""The web dashboard in a real headless Chromium against a real allotd.

allotd serves web/ (--ui-dir) on a random loopback port, meters usage every
200 ms with a price book set, and flags idle jobs and anomalies on short
windows. Two allot-agents with emulated GPUs register (gpu-1: 4 H100s
shared, reporting 0 % utilisation; gpu-2: 2 A100s in MIG mode at 60 %);
three tenants run a 2-GPU job, a MIG slice and a quarter GPU, and one job
waits with a pending reason. Later a third node on the fake libnvidia-ml
brings an unhealthy GPU, and gpu-2's agent comes back at 0 %.

The test signs in through the login form and checks that each page shows
that real data (overview, tenants with cost and budget, jobs with pending
reason, events, log and cancel, the GPU map, usage and invoice, idle jobs,
anomalies and fenced nodes), that pages update without a reload and stop
polling while hidden, that a viewer gets no cancel button, and that
a member never sees another tenant's data. After every page the browser's
console must hold no error and no warning; a self-test first proves that
check catches a console.error and a failed request.

Chromium is driven through chromedriver over W3C WebDriver (webdriver.py,
standard library only). The agents need root (cgroups, user switching):
without root, or without chromium and chromium-driver, the test is
skipped with the reason. ALLOT_SCREENSHOTS=1 also saves each page to
docs/img/dashboard-PAGE.png.

Usage: test_dashboard.py ALLOTD SOURCE_DIR
"""

import http.client
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import allotd_fixture as fx  # noqa: E402
from allotd_fixture import Agent, Daemon, expect  # noqa: E402
import webdriver  # noqa: E402

SKIP = 0  # as the other integration tests: exit 0 after a "SKIP: why" line

TENANTS = {
    "version": 1,
    "priority_classes": [
        {"name": "inference", "value": 1000, "preemptible": False},
        {"name": "training", "value": 100, "preemptible": True},
    ],
    "tenants": [
        {"path": "research", "quotas": {"gpu": {"nominal": 2, "borrow_limit": 3}}},
        {"path": "product", "isolation": "exclusive-gpu",
         "quotas": {"gpu": {"nominal": 2, "borrow_limit": 0}}},
        {"path": "interns", "quotas": {"gpu": {"nominal": 2, "borrow_limit": 1}}},
    ],
}

dm = None
br = None
url = None
jobs = {}
member = None
viewer = None
AG_TOKEN = None
agents = []
SHOTS = os.environ.get("ALLOT_SCREENSHOTS") == "1"


def submit(tenant, name, command, **kw):
    body = dict({"tenant": tenant, "name": name, "cpus": 0.1, "memory": 64,
                 "command": command}, **kw)
    j = expect(dm.req("POST", "/v1/jobs", body, token=dm.admin), 201)
    jobs[name] = j["id"]
    return j["id"]


def wait_job(jid, states, timeout=20):
    end = time.time() + timeout
    while time.time() < end:
        j = expect(dm.req("GET", "/v1/jobs/%d" % jid, token=dm.admin), 200)
        if j["state"] in states:
            return j
        time.sleep(0.05)
    raise AssertionError("job %d not %s within %ss: %r" % (jid, states, timeout, j))


def metering():
    """Whether this allotd serves /v1/usage (and so invoices)."""
    return dm.req("GET", "/v1/usage?by=tenant", token=dm.admin)[0] == 200


PRICE_BOOK = {
    "currency": "EUR",
    "books": [{"effective": "2026-01-01", "gpu_hour": {"H100-80GB": 400, "A100-80GB": 250},
               "cpu_core_hour": 3, "memory_gib_hour": 1, "reserved_discount_pct": 20,
               "borrowed_premium_pct": 10}],
    "budgets": {"research": {"monthly_minor": 5000, "warn_pct": 80}},
}


def console_problems():
    """The browser's errors and warnings since the last call. A request aborted with
    net::ERR_NETWORK_CHANGED is left out: Chromium aborts what is in flight when the
    machine's network interfaces change (another test making network namespaces at the
    same time); the page retries at its next refresh."""
    return [e for e in br.logs() if e.get("level") in ("SEVERE", "WARNING") and
            "net::ERR_NETWORK_CHANGED" not in e.get("message", "")]


def no_console_errors(where):
    bad = console_problems()
    assert not bad, "%s: the browser console has errors: %r" % (where, bad)


def shot(name, height=None):
    """With ALLOT_SCREENSHOTS=1: docs/img/dashboard-NAME.png (a taller window when asked)."""
    if SHOTS:
        d = os.path.join(fx.SOURCE, "docs", "img")
        os.makedirs(d, exist_ok=True)
        if height:
            br.cmd("POST", "/window/rect", {"width": 1400, "height": height})
        br.screenshot(os.path.join(d, "dashboard-%s.png" % name))
        if height:
            br.cmd("POST", "/window/rect", {"width": 1400, "height": 1000})


def page_text():
    return br.js("var p = document.getElementById('page'); return p ? p.innerText : '';")


def goto(page, ready_js, what):
    """Opens #/page and waits until ready_js (a function body) is truthy."""
    br.js("location.hash = arguments[0];", page)
    try:
        br.wait("return document.getElementById('page').dataset.page === arguments[0] && "
                "/updated/.test(document.getElementById('status').textContent);",
                "page %s loaded" % page, 15, page.split("?")[0].lstrip("#/"))
        return br.wait(ready_js, what)
    except AssertionError as e:
        raise AssertionError("%s; the page's status: %r; console: %r" % (
            e, br.js("return document.getElementById('status').textContent;"), br.logs()))


def signed_in_as():
    """The header's "name (role, tenant)" once it shows."""
    return br.wait("return !document.getElementById('who').hidden && "
                   "document.getElementById('who').textContent;", "who is signed in")


def login(token):
    br.get(url)
    br.wait("return !document.getElementById('login').hidden;", "the login form")
    el = br.cmd("POST", "/element", {"using": "css selector", "value": "#token"})
    el = list(el.values())[0]
    br.cmd("POST", "/element/%s/value" % el, {"text": token})
    btn = list(br.cmd("POST", "/element", {"using": "css selector",
                                           "value": "#login button[type=submit]"}).values())[0]
    br.cmd("POST", "/element/%s/click" % btn, {})
    br.wait("return !document.getElementById('nav').hidden && "
            "document.getElementById('page').dataset.page === 'overview' && "
            "document.querySelector('[data-card=gpus] .value');", "signed in")


def logout():
    btn = list(br.cmd("POST", "/element", {"using": "css selector",
                                           "value": "#logout"}).values())[0]
    br.cmd("POST", "/element/%s/click" % btn, {})
    br.wait("return !document.getElementById('login').hidden && "
            "!sessionStorage.getItem('allot.token');", "signed out")


# ---- tests ----

def test_console_check_catches_errors():
    """The console check is real: a console.error and a 404 are both caught by it."""
    br.get(url)
    br.wait("return document.readyState === 'complete';", "the page")
    no_console_errors("the login page")
    br.js("console.error('deliberate dashboard test error'); fetch('/v1/no-such-route');")
    caught = ""
    end = time.time() + 10
    while time.time() < end and not ("deliberate" in caught and "404" in caught):
        try:
            no_console_errors("self-test")
        except AssertionError as e:
            caught += str(e)
        time.sleep(0.1)
    assert "deliberate dashboard test error" in caught and "404" in caught, \
        "the console check missed a console.error or a failed request: %r" % caught


def test_security_headers():
    """The dashboard's files come with headers that keep them out of other sites'
    frames and types as given; its own pages work under its content policy
    (no violation in the console)."""
    c = http.client.HTTPConnection("127.0.0.1", dm.port, timeout=10)
    c.request("GET", "/ui/")
    r = c.getresponse()
    r.read()
    assert r.status == 200, r.status
    assert r.getheader("X-Content-Type-Options") == "nosniff"
    assert r.getheader("X-Frame-Options") == "DENY"
    assert "frame-ancestors 'none'" in r.getheader("Content-Security-Policy")
    # a file that did not change is answered 304 without its bytes
    tag = r.getheader("ETag")
    assert tag and tag.startswith('"') and r.getheader("Cache-Control") == "no-cache", tag
    for inm, want in [(tag, 304), ("W/" + tag, 304), ('"0", ' + tag, 304), ("*", 304),
                      ('"0"', 200), (tag[:-2] + '"', 200)]:
        c.request("GET", "/ui/", headers={"If-None-Match": inm})
        r = c.getresponse()
        body = r.read()
        assert r.status == want and (body == b"") == (want == 304), (inm, r.status, len(body))
        assert r.getheader("ETag") == tag, (inm, r.getheader("ETag"))
    c.request("GET", "/ui/app.js", headers={"If-None-Match": tag})
    r = c.getresponse()
    assert r.status == 200 and r.read() and r.getheader("ETag") != tag


def test_helpers():
    """The dashboard's own formatting and GPU-map helpers, run in the browser."""
    got = br.js_async(
        "var done = arguments[arguments.length - 1];"
        "Promise.all([import('./util.js'), import('./model.js')]).then(function (m) {"
        "  var u = m[0], g = m[1];"
        "  var nodes = [{name: 'n', inventory: {gpus: [{model: 'A100-80GB', uuid: 'U0'},"
        "    {model: 'A100-80GB', uuid: 'U1'}, {model: 'A100-80GB', uuid: 'U2'}]},"
        "    health: {gpus: [{index: 0, uuid: 'U0', health: 'healthy', mig: [{profile: '3g.40gb',"
        "    start: 4}]}, {index: 2, uuid: 'U2', health: 'unhealthy', text: 'Xid 79', mig: []},"
        "    {index: 1, uuid: 'U1', health: 'healthy', mig: []}]}}];"
        "  var jobs = [{id: 1, tenant: 'a', state: 'running', placement: {tasks: [{node: 'n',"
        "    gpus: [0], gpu_milli: 428, mig_profile: '3g.40gb', mig_start: 4}]}},"
        "    {id: 2, tenant: 'b', state: 'running', placement: {tasks: [{node: 'n', gpus: [1],"
        "    gpu_milli: 250}]}}, {id: 3, tenant: 'c', state: 'running', placement: {tasks: [{"
        "    node: 'n', gpus: [1], gpu_milli: 500}]}}, {id: 4, tenant: 'a', state: 'succeeded',"
        "    placement: {tasks: [{node: 'n', gpus: [1]}]}}];"
        "  var map = g.gpuMap(nodes, jobs).get('n');"
        "  var t = g.totals(g.gpuMap(nodes, jobs), jobs);"
        "  done({money: [u.fmtMoney(123456, 'EUR'), u.fmtMoney(-5, ''), u.fmtMoney(0, 'USD'),"
        "               u.fmtMoney(100000000, '')],"
        "        rates: [u.fmtRate(0.8, 'EUR'), u.fmtRate(2.4, ''), u.fmtRate(4356000, ''),"
        "                u.fmtRate(3168000.5, ''), u.fmtRate(0.7, '')],"
        "        qty: [u.fmtQty(0), u.fmtQty(0.00123), u.fmtQty(2.5), u.fmtQty(1234.5)],"
        "        dur: [u.fmtDuration(59), u.fmtDuration(3700), u.fmtDuration(90000)],"
        "        mig: [g.migSize('1g.10gb'), g.migSize('3g.40gb'), g.migSize('7g.80gb')],"
        "        states: map.map(g.slotState), migJob: map[0].mig[0].job.id,"
        "        fracs: map[1].fracs.map(function (f) { return f.milli; }),"
        "        health: map[2].text, byState: t.byState,"
        "        tenants: [...t.byTenant.values()].map(function (x) {"
        "          return x.tenant + ' ' + x.gpus.toFixed(3); }),"
        "        carved: (function () {"  # one GPU carved into seven 1g slices is in use whole
        "          var n2 = [{name: 'm', inventory: {gpus: [{model: 'A100-80GB'}]}}], j2 = [];"
        "          for (var i = 0; i < 7; i++) j2.push({id: 10 + i, tenant: 'a', state: 'running',"
        "            placement: {tasks: [{node: 'm', gpus: [0], gpu_milli: 142,"
        "            mig_profile: '1g.10gb', mig_start: i}]}});"
        "          return g.totals(g.gpuMap(n2, j2), j2).byModel.get('A100-80GB').used; })()});"
        "}, function (e) { done('error: ' + e); });")
    assert got["money"] == ["1,234.56 EUR", "-0.05", "0.00 USD", "1,000,000.00"], got
    assert got["rates"] == ["0.008 EUR", "0.024", "43,560.00", "31,680.005", "0.007"], got
    assert got["qty"] == ["0", "0.0012", "2.500", "1235"], got
    assert got["dur"] == ["59s", "1h 01m", "1d 1h"], got
    assert got["mig"] == [1, 4, 8], got
    assert got["states"] == ["mig", "fraction", "unhealthy"] and got["migJob"] == 1, got
    assert got["fracs"] == [250, 500] and got["health"] == "Xid 79", got
    assert got["byState"] == {"whole": 0, "mig": 1, "fraction": 1, "free": 0,
                              "unhealthy": 1}, got
    assert sorted(got["tenants"]) == ["a 0.428", "b 0.250", "c 0.500"], got
    assert got["carved"] == 1, got
    no_console_errors("helpers")


def try_token(token):
    """Types token into the sign-in form and submits it; the form's message."""
    br.get(url)
    br.wait("return !document.getElementById('login').hidden;", "the login form")
    br.js("document.getElementById('token').value = arguments[0];"
          "document.getElementById('login-error').textContent = '';"
          "document.querySelector('#login button[type=submit]').click();", token)
    return br.wait("return document.getElementById('login-error').textContent;",
                   "a sign-in message")


def test_login_and_overview():
    # a token allotd does not know, and none, are named as such
    msg = try_token("allot_" + "0" * 64)
    assert "does not know this token" in msg, msg
    assert "Paste a token first" in try_token("   ")
    console_problems()  # the refused token's 401 is expected
    login(dm.admin)
    t = goto("#/overview", "return document.querySelector('#queue [data-job]') && "
             "document.getElementById('page').innerText;", "the overview with its queue")
    gpus = br.js("return document.querySelector('[data-card=gpus] .value').textContent;")
    assert gpus == "6", gpus
    inuse = br.js("return document.querySelector('[data-card=in-use] .sub').textContent;")
    assert inuse == "2 whole, 1 MIG, 1 fraction", inuse
    queue = br.js("return document.querySelector('[data-card=queue] .value').textContent;")
    assert queue == "1", queue
    assert "H100-80GB" in t and "A100-80GB" in t, t
    row = br.js("return document.querySelector('#by-tenant tr[data-tenant=research]').innerText;")
    assert "2.25" in row, row  # 2 whole GPUs and a quarter
    assert "serve-big" in t and "borrowing not allowed" in t, t
    who = signed_in_as()
    assert "(admin, all tenants)" in who, who
    no_console_errors("overview")
    shot("overview")


def test_tenants():
    goto("#/tenants", "return document.querySelector('#tenants tr[data-tenant=interns]');",
         "the tenants table")
    cell = lambda t, c: br.js(  # noqa: E731
        "return document.querySelector('#tenants tr[data-tenant=\"' + arguments[0] + "
        "'\"] [data-col=' + arguments[1] + ']').textContent;", t, c)
    assert cell("research", "use") == "2.25", cell("research", "use")
    assert cell("research", "borrowed") == "0.25", cell("research", "borrowed")
    assert cell("product", "use") == "0", cell("product", "use")
    assert cell("interns", "use") == "0.14", cell("interns", "use")
    # research's 0.25 borrowed GPU, lent by product (2 idle) and interns (1.86) in proportion
    assert cell("research", "lent") == "0", cell("research", "lent")
    assert cell("product", "lent") == "0.13" and cell("interns", "lent") == "0.12", \
        (cell("product", "lent"), cell("interns", "lent"))
    if metering():
        assert cell("research", "cost").endswith(" EUR"), cell("research", "cost")
        assert "50.00 EUR" in cell("research", "budget"), cell("research", "budget")
        assert cell("product", "budget") == "-", cell("product", "budget")
    no_console_errors("tenants")
    shot("tenants")


def test_jobs_page():
    t = goto("#/jobs?state=all", "return document.querySelector('#jobs tr[data-job]') && "
             "document.getElementById('page').innerText;", "the jobs table")
    for name in ("train-a", "notebook", "eval-quarter", "serve-big", "hello"):
        assert name in t, (name, t)
    # a history is shown newest first
    ids = br.js("return [...document.querySelectorAll('#jobs tr[data-job]')]"
                ".map(function (x) { return +x.dataset.job; });")
    assert len(ids) >= 5 and ids == sorted(ids, reverse=True), ids
    # ... read newest first, one page, whatever the history's length
    urls = br.js("return performance.getEntriesByType('resource').map(function (e) {"
                 " return e.name; }).filter(function (n) { return n.indexOf('/v1/jobs?') >= 0; });")
    assert any("order=newest&limit=1000" in u for u in urls), urls
    reason = br.js("return document.querySelector('#jobs tr[data-job=\"%d\"] .reason')"
                   ".textContent;" % jobs["serve-big"])
    assert "product" in reason and "borrowing not allowed" in reason, reason
    # who submitted it, as the API names its user
    user = br.js("return document.querySelector('#jobs tr[data-job=\"%d\"] .user')"
                 ".textContent;" % jobs["notebook"])
    st, api_job = dm.req("GET", "/v1/jobs/%d" % jobs["notebook"], token=dm.admin)
    assert st == 200 and api_job["user"] and user == api_job["user"], (user, api_job)
    place = br.js("return document.querySelector('#jobs tr[data-job=\"%d\"] .placement')"
                  ".textContent;" % jobs["notebook"])
    assert place == "gpu-2:0 1g.10gb@%s" % place.split("@")[1] and "1g.10gb" in place, place
    # a state filter is applied by allotd
    br.js("var s = document.getElementById('f-state'); s.value = 'pending';"
          "s.dispatchEvent(new Event('change'));")
    br.wait("var r = document.querySelectorAll('#jobs tr[data-job]');"
            "return r.length === 1 && r[0].dataset.state === 'pending';", "only pending jobs")
    assert "state=pending" in br.js("return location.hash;")
    br.js("var s = document.getElementById('f-state'); s.value = '';"
          "s.dispatchEvent(new Event('change'));")
    live = br.wait("var r = [...document.querySelectorAll('#jobs tr[data-job]')];"
                   "return r.length === 4 && r.map(function (x) { return x.dataset.state; });",
                   "the live jobs (the default)")
    assert set(live) == {"pending", "running"}, live
    # the tenant filter lists every tenant; choosing one filters by it
    opts = br.wait("var o = [...document.querySelectorAll('#f-tenant option')]"
                   ".map(function (x) { return x.value; }); return o.length > 2 && o;",
                   "the tenant choices")
    assert opts[0] == "" and "research" in opts and "product" in opts, opts
    br.js("var s = document.getElementById('f-tenant'); s.value = 'product';"
          "s.dispatchEvent(new Event('change'));")
    br.wait("var r = [...document.querySelectorAll('#jobs tr[data-job]')];"
            "return r.length > 0 && r.every(function (x) {"
            " return x.querySelector('.tenant').dataset.tenant === 'product'; });",
            "product's jobs only")
    assert "tenant=product" in br.js("return location.hash;")
    assert br.js("return document.getElementById('f-tenant').value;") == "product"
    br.js("var s = document.getElementById('f-tenant'); s.value = '';"
          "s.dispatchEvent(new Event('change'));")
    # a link to a job that is not there says so, once, and forgets it
    goto("#/jobs?job=999999", "return /No job 999999/.test("
         "document.getElementById('jobs-msg').textContent);", "the missing job named")
    br.wait("return !/job=/.test(location.hash);", "the missing job forgotten")
    before = br.js("return document.getElementById('status').textContent;")
    br.wait("return document.getElementById('status').textContent !== arguments[0] && "
            "/updated/.test(document.getElementById('status').textContent);",
            "the next refresh", 10, before)
    missing = console_problems()  # its one 404, not one at every refresh
    assert len(missing) == 1 and "/v1/jobs/999999" in missing[0]["message"], missing
    # details: events and the task log
    goto("#/jobs?job=%d" % jobs["hello"], "return document.querySelector('#events "
         "tr[data-event=succeeded]');", "the events of job hello")
    ev = br.js("return [...document.querySelectorAll('#events tr[data-event]')]"
               ".map(function (r) { return r.dataset.event; });")
    assert ev[:2] == ["submitted", "placed"] and ev[-1] == "succeeded", ev
    br.js("document.querySelector('.logs-link').click();")
    log = br.wait("var l = document.getElementById('job-logs');"
                  "return l && !l.hidden && /hello-dashboard/.test(l.textContent) && "
                  "l.textContent;", "the task log")
    assert "hello-dashboard" in log, log
    # the open log stays through the next refreshes, and its link still fills it
    before = br.js("return document.getElementById('status').textContent;")
    br.wait("return document.getElementById('status').textContent !== arguments[0] && "
            "/updated/.test(document.getElementById('status').textContent);",
            "the next refresh", 10, before)
    assert "hello-dashboard" in br.js("return document.getElementById('job-logs').textContent;")
    br.js("var l = document.getElementById('job-logs'); l.textContent = '';"
          "document.querySelector('.logs-link').click();")
    br.wait("return /hello-dashboard/.test(document.getElementById('job-logs').textContent);",
            "the log read again after refreshes")
    assert br.js("return !document.getElementById('job-priority');"), "a class choice for an ended job"
    # a waiting job's class is chosen in its details; the choice stays through refreshes
    jid = jobs["serve-big"]
    goto("#/jobs?job=%d" % jid, "var s = document.getElementById('job-priority');"
         "return s && s.value;", "the class choice of job serve-big")
    assert br.js("return document.getElementById('job-priority').value;") == "inference"
    br.js("var s = document.getElementById('job-priority'); s.value = 'training';"
          "s.dispatchEvent(new Event('change'));")
    end = time.time() + 10
    while time.time() < end and expect(dm.req("GET", "/v1/jobs/%d" % jid, token=dm.admin),
                                       200)["spec"]["priority"] != "training":
        time.sleep(0.05)
    assert expect(dm.req("GET", "/v1/jobs/%d" % jid, token=dm.admin),
                  200)["spec"]["priority"] == "training"
    br.wait("var s = document.getElementById('job-priority');"
            "return s && !s.disabled && s.value === 'training' && "
            "document.querySelector('#events tr[data-event=priority]');",
            "the new class and its event shown")
    br.js("var s = document.getElementById('job-priority'); s.value = 'inference';"
          "s.dispatchEvent(new Event('change'));")
    br.wait("var s = document.getElementById('job-priority');"
            "return s && !s.disabled && s.value === 'inference' && "
            "document.querySelectorAll('#events tr[data-event=priority]').length === 2;",
            "the class given back")
    no_console_errors("jobs")
    shot("jobs")


def test_live_update_and_cancel():
    """A job submitted elsewhere appears without a reload; cancel stops it."""
    goto("#/jobs", "return document.querySelector('#jobs tr[data-job]');", "live jobs")
    br.js("window.__marker = 1;")  # gone if the page reloads
    jid = submit("research", "late-arrival", ["sleep", "300"], gpus=1)
    br.wait("return document.querySelector('#jobs tr[data-job=\"%d\"]');" % jid,
            "the new job listed by polling", 15)
    assert br.js("return window.__marker;") == 1, "the page reloaded"
    wait_job(jid, ("running",))
    sel = "#jobs tr[data-job=\"%d\"] button.cancel" % jid
    br.wait("return document.querySelector(arguments[0]);", "a cancel button", 15, sel)
    # the keyboard's place and the confirm step survive the next refreshes
    br.js("document.querySelector(arguments[0]).focus();", sel)
    br.js("document.querySelector(arguments[0]).click();", sel)
    br.wait("var b = document.querySelector(arguments[0]); return b && b.dataset.armed === '1';",
            "the confirm step", 10, sel)
    before = br.js("return document.getElementById('status').textContent;")
    br.wait("return document.getElementById('status').textContent !== arguments[0] && "
            "/updated/.test(document.getElementById('status').textContent);",
            "the next refresh", 10, before)
    assert br.js("var b = document.querySelector(arguments[0]);"
                 "return b.dataset.armed === '1' && document.activeElement === b;", sel), \
        "a refresh lost the focus or the confirm step"
    br.js("document.querySelector(arguments[0]).click();", sel)
    j = wait_job(jid, ("cancelled",))
    assert j["state"] == "cancelled", j
    br.wait("return !document.querySelector('#jobs tr[data-job=\"%d\"]');" % jid,
            "the cancelled job leaves the live list", 15)
    no_console_errors("cancel")


CONTRAST_JS = (
    "function rgb(c) { return c.match(/[0-9.]+/g).slice(0, 3).map(Number); }"
    "function lum(v) { return v.map(function (x) { x /= 255; return x <= 0.03928 ? x / 12.92 :"
    " Math.pow((x + 0.055) / 1.055, 2.4); }).reduce(function (a, x, i) {"
    " return a + [0.2126, 0.7152, 0.0722][i] * x; }, 0); }"
    "function ratio(a, b) { var x = lum(a), y = lum(b);"
    " return (Math.max(x, y) + 0.05) / (Math.min(x, y) + 0.05); }")


def test_gpu_map():
    goto("#/nodes", "return document.querySelector('[data-node=gpu-2] .part.mig[data-job]');",
         "the GPU map")
    gpus = br.js("return [...document.querySelectorAll('[data-node]')].map(function (n) {"
                 "return n.dataset.node + ':' + n.querySelectorAll('.gpu').length; });")
    assert sorted(gpus) == ["gpu-1:4", "gpu-2:2"], gpus
    # a node's own labels, not the agent's allot.io/ ones; none: no such line
    labels = br.js("return [...document.querySelectorAll('[data-node]')].map(function (n) {"
                   "var l = n.querySelector('.labels'); return l ? l.textContent : null; });")
    assert labels == ["labels nvlink, rack=r1", None], labels
    whole = br.js("return [...document.querySelectorAll('[data-node=gpu-1] .part.whole')]"
                  ".map(function (p) { return p.dataset.tenant; });")
    assert whole == ["research", "research"], whole
    frac = br.js("var p = document.querySelector('[data-node=gpu-1] .part.fraction');"
                 "return [p.dataset.tenant, p.style.width];")
    assert frac == ["research", "25%"], frac
    mig = br.js("var p = document.querySelector('[data-node=gpu-2] .part.mig[data-job]');"
                "return [p.dataset.tenant, p.textContent, p.style.width];")
    assert mig == ["interns", "interns 1g.10gb", "12.5%"], mig
    health = br.js("return [...document.querySelectorAll('.gpu')].map(function (g) {"
                   "return g.dataset.health; });")
    assert health == ["healthy"] * 6, health
    # every label reads on its tenant's colour (WCAG contrast 4.5:1 or more),
    # for the tenants here and for names of every hue
    worst = br.js(CONTRAST_JS + "return Math.min.apply(null, [...document.querySelectorAll("
                  "'.part[data-job]')].map(function (p) { var s = getComputedStyle(p);"
                  "return ratio(rgb(s.color), rgb(s.backgroundColor)); }));")
    assert worst >= 4.5, worst
    worst = br.js(CONTRAST_JS + "return import('./util.js').then(function (u) {"
                  "var m = 99; for (var i = 0; i < 400; i++) { var n = 'tenant-' + i;"
                  "var d = document.createElement('div'); d.style.color = u.tenantInk(n);"
                  "d.style.background = u.tenantColor(n); document.body.append(d);"
                  "var s = getComputedStyle(d); m = Math.min(m, ratio(rgb(s.color),"
                  "rgb(s.backgroundColor))); d.remove(); } return m; });")
    assert worst >= 4.5, worst
    no_console_errors("nodes")


def test_usage_and_invoices():
    if not metering():
        print("SKIP test_usage_and_invoices: this allotd does not serve /v1/usage")
        return
    end = time.time() + 20
    while time.time() < end:  # the roll-ups follow every --meter-interval (200 ms here)
        b = expect(dm.req("GET", "/v1/usage?by=tenant", token=dm.admin), 200)
        if any(r["key"] == "research" and r["gpu_seconds"] > 0 for r in b["rows"]):
            break
        time.sleep(0.1)
    else:
        raise AssertionError("no metered usage of research: %r" % b)
    goto("#/usage", "return document.querySelector('#invoice tr.total') && "
         "document.querySelector('#usage-totals tr[data-tenant=research]');",
         "usage and invoice")
    tenants = br.js("return [...document.querySelectorAll('#usage-totals tr[data-tenant]')]"
                    ".map(function (r) { return r.dataset.tenant; });")
    assert "research" in tenants, tenants
    models = br.js("return [...document.querySelectorAll('#usage-models tr[data-model]')]"
                   ".map(function (r) { return r.dataset.model; });")
    assert "H100-80GB" in models and "A100-80GB" in models, models
    bars = br.js("return document.querySelectorAll('#usage-chart rect[data-series]').length;")
    assert bars >= 1, "no usage bars"
    period = time.strftime("%Y-%m", time.gmtime())
    lines = br.js("return [...document.querySelectorAll('#invoice tr[data-tenant=research]')]"
                  ".map(function (r) { return r.innerText; });")
    assert any("H100-80GB" in l and "EUR" in l for l in lines), lines
    assert br.js("return !!document.getElementById('unbilled');"), "no unbilled line"
    shown = br.js("return document.getElementById('cluster-total').textContent;")
    inv = expect(dm.req("GET", "/v1/invoices?period=" + period, token=dm.admin), 200)
    # each line names the price book version that priced it, as /v1/invoices says
    head = br.js("return [...document.querySelectorAll('#invoice th')].map("
                 "function (c) { return c.textContent; });")
    assert "Prices of" in head, head
    versions = br.js("return [...document.querySelectorAll('#invoice tr[data-tenant] "
                     "td.price-book')].map(function (c) { return c.textContent; });")
    want = {l["price_book"] for t in inv["tenants"] for l in t["lines"]}
    assert versions and set(versions) == want == {"2026-01-01"}, (versions, want)
    minor = int(shown.split()[0].replace(",", "").replace(".", ""))
    # the cluster's cost grows with time: what the page shows is at most what allotd says now
    assert 0 < minor <= inv["cluster"]["amount_minor"], (shown, inv["cluster"])
    assert shown.endswith(" EUR"), shown
    no_console_errors("usage")
    shot("usage", 1500)
    # a link with a bad period shows this month, in the field too
    goto("#/usage?period=garbage", "return document.getElementById('f-period') && "
         "document.getElementById('f-period').value;", "the period field")
    month = br.js("var d = new Date(); return d.getUTCFullYear() + '-' + "
                  "String(d.getUTCMonth() + 1).padStart(2, '0');")
    assert br.js("return document.getElementById('f-period').value;") == month


def test_idle_and_health():
    """The 2-GPU job on gpu-1 (0 % utilisation) is listed idle; the MIG notebook (60 %) not."""
    jid = jobs["train-a"]
    end = time.time() + 20
    while time.time() < end:  # flagged after its 2 s window, refreshed every 200 ms
        idle = expect(dm.req("GET", "/v1/idle", token=dm.admin), 200)["jobs"]
        if any(i["job"] == jid for i in idle):
            break
        time.sleep(0.1)
    else:
        raise AssertionError("train-a was not flagged idle: %r" % idle)
    goto("#/idle", "return document.querySelector('#idle tr[data-job=\"%d\"]');" % jid,
         "the idle job")
    rows = br.js("return [...document.querySelectorAll('#idle tr[data-job]')].map(function (r) {"
                 "return r.dataset.job + ' ' + r.querySelector('[data-tenant]').dataset.tenant; });")
    assert "%d research" % jid in rows and str(jobs["notebook"]) + " interns" not in rows, rows
    cells = br.js("return document.querySelector('#idle tr[data-job=\"%d\"]').innerText;" % jid)
    assert "0%" in cells, cells  # its measured utilisation
    # a third node whose GPU 1 had an Xid 79 (the fake libnvidia-ml of tests/fake)
    lib = os.path.join(os.path.dirname(fx.AGENT), "fake-nvml", "libnvidia-ml.so.1")
    if not os.path.exists(lib):
        print("SKIP the unhealthy GPU: %s is not built" % lib)
        no_console_errors("idle")
        return
    conf = os.path.join(fx.tempdir(), "machine")
    with open(conf, "w") as f:
        f.write('gpu name="NVIDIA H100 80GB HBM3" mem=81559 uuid=GPU-f0 minor=0\n'
                'gpu name="NVIDIA H100 80GB HBM3" mem=81559 uuid=GPU-f1 minor=1\nxid 1 79\n')
    agents.append(Agent(dm, AG_TOKEN, "gpu-3", emulate="", args=["--nvml-lib", lib],
                        env={"FAKE_NVML_CONFIG": conf}))
    row = br.wait("var r = document.querySelector('#gpu-health tr[data-uuid=GPU-f1]');"
                  "return r && r.innerText;", "the unhealthy GPU of gpu-3", 20)
    assert "gpu-3" in row and "unhealthy" in row and "Xid 79" in row, row
    assert br.js("return document.querySelector('[data-card=unhealthy] .value').textContent;") \
        == "1"
    no_console_errors("idle")
    goto("#/nodes", "return document.querySelector('[data-node=gpu-3] .gpu[data-uuid=GPU-f1]');",
         "gpu-3 on the map")
    health = br.js("return [...document.querySelectorAll('[data-node=gpu-3] .gpu')].map("
                   "function (g) { return g.dataset.health + ' ' + g.dataset.state; });")
    assert health == ["healthy free", "unhealthy unhealthy"], health
    no_console_errors("nodes with an unhealthy GPU")
    shot("nodes")


def test_anomalies_and_fencing():
    """gpu-2's agent comes back reporting 0 % instead of 60 %: the MIG notebook's utilisation
    changed abruptly (an anomaly); gpu-3, with its unhealthy GPU, is fenced."""
    jid = jobs["notebook"]
    gpu2 = [a for a in agents if a.name == "gpu-2"][0]
    gpu2.stop()
    gpu2.args[gpu2.args.index("--emulate-util") + 1] = "0"
    gpu2.start()  # adopts the running notebook
    # seen while the window (20 s) holds both rates and the job has run for all of it
    end = time.time() + 40
    while time.time() < end:
        found = expect(dm.req("GET", "/v1/anomalies", token=dm.admin), 200)["anomalies"]
        if any(a.get("job") == jid for a in found):
            break
        time.sleep(0.1)
    else:
        raise AssertionError("no anomaly for the notebook: %r" % found)
    row = goto("#/idle", "var r = document.querySelector('#anomalies tr[data-job=\"%d\"]');"
               "return r && r.innerText;" % jid, "the notebook's anomaly")
    assert "interns" in row and "notebook" in row, row
    if [a for a in agents if a.name == "gpu-3"]:
        fenced = br.wait("var r = document.querySelector('#not-ready tr[data-node=gpu-3]');"
                         "return r && r.innerText;", "gpu-3 fenced")
        assert "Xid 79" in fenced, fenced
    no_console_errors("anomalies")
    shot("idle")


def test_hidden_tab_makes_no_calls():
    """A hidden tab stops polling; shown again, it refreshes at once."""
    goto("#/overview", "return document.querySelector('#by-tenant tr[data-tenant]');",
         "the overview")
    br.js("Object.defineProperty(document, 'hidden', {configurable: true, get: function () {"
          "  return true; }});"
          "window.__hiddenAt = performance.now(); window.__calls = 0;"
          "new PerformanceObserver(function (list) { list.getEntries().forEach(function (e) {"
          "  if (e.name.indexOf('/v1/') >= 0 && e.startTime > window.__hiddenAt)"
          "    window.__calls++; }); }).observe({type: 'resource'});"
          "document.dispatchEvent(new Event('visibilitychange'));")
    time.sleep(4.5)  # proving an absence: longer than the 3 s poll interval
    assert br.js("return window.__calls;") == 0, "a hidden tab kept polling"
    br.js("delete document.hidden; document.dispatchEvent(new Event('visibilitychange'));")
    br.wait("return window.__calls > 0;", "a refresh once visible again", 5)
    no_console_errors("hidden tab")


def test_viewer_cannot_cancel():
    """A viewer, whom allotd refuses to cancel, gets no cancel buttons (its role is known
    at sign-in), not buttons that end in a 403."""
    logout()
    login(viewer)
    jid = jobs["serve-big"]
    goto("#/jobs", "return document.querySelector('#jobs tr[data-job=\"%d\"]');" % jid,
         "the jobs")
    br.wait("return !document.querySelector('#jobs button.cancel');", "no cancel button", 5)
    time.sleep(3.5)  # and none after a refresh (the poll interval is 3 s)
    assert br.js("return !document.querySelector('#jobs button.cancel');"), "a cancel button"
    assert wait_job(jid, ("pending",))["state"] == "pending"
    # nor a choice of class for a waiting job: its class as text
    goto("#/jobs?job=%d" % jid, "return document.querySelector('#events tr[data-event]');",
         "the details of job serve-big")
    assert br.js("return !document.getElementById('job-priority') && "
                 "/inference/.test(document.getElementById('job-detail').textContent);"), \
        "a class choice for a viewer"
    no_console_errors("viewer")


def test_without_price_book():
    """A second allotd with no price book: usage without an invoice, no cost; the console
    holds at most the 404 of GET /v1/pricebook (how allotd says there is none)."""
    if not metering():
        print("SKIP test_without_price_book: this allotd does not serve /v1/usage")
        return
    global url
    other = Daemon(args=["--ui-dir", os.path.join(fx.SOURCE, "web")])
    saved = url
    try:
        expect(other.req("PUT", "/v1/tenants", TENANTS, token=other.admin), 200)
        logout()
        url = "http://127.0.0.1:%d/ui/" % other.port
        login(other.admin)
        goto("#/usage", "return document.getElementById('no-price-book');", "no invoice")
        goto("#/tenants", "return document.querySelector('#tenants tr[data-tenant=research]');",
             "the tenants")
        cost = br.js("return document.querySelector('#tenants tr[data-tenant=research] "
                     "[data-col=cost]').textContent;")
        assert cost == "-", cost
        bad = console_problems()
        assert all("/v1/pricebook" in e["message"] and "404" in e["message"] for e in bad), bad
        logout()
    finally:
        url = saved
        other.stop()
    login(viewer)  # back on the first allotd for the next test
    no_console_errors("back")


def test_member_sees_only_its_tenant():
    logout()
    login(member)
    t = goto("#/jobs", "return document.querySelector('#jobs tr[data-job]') && "
             "document.getElementById('page').innerText;", "the member's jobs")
    tenants = br.js("return [...document.querySelectorAll('#jobs tr[data-job] [data-tenant]')]"
                    ".map(function (e) { return e.dataset.tenant; });")
    assert tenants and set(tenants) == {"interns"}, tenants
    who = signed_in_as()
    assert "(member, interns)" in who, who
    # a member may cancel its jobs: the viewer's refusal was forgotten with its token
    assert br.js("return !!document.querySelector('#jobs button.cancel');"), "no cancel button"
    for other in ("train-a", "eval-quarter", "serve-big", "hello"):
        assert other not in t, (other, t)
    goto("#/nodes", "return document.querySelector('[data-node=gpu-2] .part.mig[data-job]');",
         "the member's GPU map")
    seen = br.js("return [...document.querySelectorAll('.part[data-tenant]')]"
                 ".map(function (p) { return p.dataset.tenant; });")
    assert set(seen) == {"interns"}, seen
    if metering():
        goto("#/usage", "return document.querySelector('#usage-totals tr[data-tenant]') && "
             "document.querySelector('#invoice tr.subtotal');", "the member's usage")
        seen = br.js("return [...document.querySelectorAll('#usage-totals tr[data-tenant], "
                     "#invoice tr[data-tenant], #usage-chart rect[data-series]')].map("
                     "function (r) { return r.dataset.tenant || r.dataset.series; });")
        assert set(seen) == {"interns"}, seen
        assert not br.js("return document.getElementById('cluster-total');"), "cluster cost shown"
        goto("#/idle", "return document.getElementById('idle');", "the member's idle jobs")
        seen = br.js("return [...document.querySelectorAll('#idle tr[data-job], "
                     "#anomalies tr[data-kind]')].map(function (r) {"
                     "return r.querySelector('[data-tenant]').dataset.tenant; });")
        assert set(seen) <= {"interns"}, seen
    goto("#/overview", "return document.querySelector('#by-tenant tr[data-tenant]');",
         "the member's overview")
    rows = br.js("return [...document.querySelectorAll('#by-tenant tr[data-tenant]')]"
                 ".map(function (r) { return r.dataset.tenant; });")
    assert rows == ["interns"], rows
    assert "serve-big" not in page_text()
    # what such a token cannot see is said, not shown as a fact: other
    # tenants' GPUs count as free here, and its tenant's fair share among
    # siblings it does not see is not given
    note = br.js("return document.getElementById('scope-note').textContent;")
    assert "interns only" in note, note
    heads = br.js("return [...document.querySelectorAll('#by-model th')]"
                  ".map(function (x) { return x.textContent; });")
    assert "In use by interns" in heads and "Free" not in heads, heads
    goto("#/tenants", "return document.querySelector('#tenants tr[data-tenant=interns]');",
         "the member's tenants")
    share = br.js("return [...document.querySelectorAll('#tenants tr[data-tenant=interns] td')]"
                  ".map(function (x) { return x.textContent; })[9];")
    assert share == "-", share
    no_console_errors("member")
    logout()
    no_console_errors("logout")


def setup():
    global dm, br, url, member, viewer
    dm = Daemon(args=["--ui-dir", os.path.join(fx.SOURCE, "web"), "--meter-interval", "200ms",
                      "--idle-window", "2s", "--idle-threshold", "10", "--anomaly-window", "20s"])
    url = "http://127.0.0.1:%d/ui/" % dm.port
    expect(dm.req("PUT", "/v1/tenants", TENANTS, token=dm.admin), 200)
    if metering():
        expect(dm.req("PUT", "/v1/pricebook", PRICE_BOOK, token=dm.admin), 200)
    global AG_TOKEN
    ag = AG_TOKEN = dm.token("agent", name="nodes")
    # gpu-1's GPUs report 0 % utilisation (its whole-GPU job is flagged idle), gpu-2's 60 %
    agents.append(Agent(dm, ag, "gpu-1", emulate="4xH100-80GB",
          args=["--gpu-mode", "shared", "--emulate-util", "0", "--sample-interval", "200ms",
                "--labels", "rack=r1,nvlink"]))
    agents.append(Agent(dm, ag, "gpu-2", emulate="2xA100-80GB",
          args=["--gpu-mode", "mig", "--emulate-util", "60", "--sample-interval", "200ms"]))
    for _ in range(200):  # bounded: agents register within a second
        st, b = dm.req("GET", "/v1/nodes", token=dm.admin)
        if st == 200 and len(b["nodes"]) == 2:
            break
        time.sleep(0.05)
    else:
        raise AssertionError("the agents did not register")
    sleep = ["sleep", "600"]
    submit("research", "train-a", sleep, gpus=2, gpu_models=["H100-80GB"])
    submit("interns", "notebook", sleep, mig="1g.10gb")
    submit("research", "eval-quarter", sleep, gpu_milli=250, gpu_memory=8192,
           gpu_models=["H100-80GB"])
    submit("research", "hello", ["sh", "-c", "echo hello-dashboard"], gpus=0)
    for name in ("train-a", "notebook", "eval-quarter"):
        wait_job(jobs[name], ("running",))
    wait_job(jobs["hello"], ("succeeded",))
    submit("product", "serve-big", sleep, gpus=4, priority="inference")
    end = time.time() + 10
    while time.time() < end:  # its pending reason comes with the next cycle
        j = expect(dm.req("GET", "/v1/jobs/%d" % jobs["serve-big"], token=dm.admin), 200)
        if j["pending_reason"]:
            break
        time.sleep(0.05)
    member = dm.token("member", "interns", "intern-1")
    viewer = dm.token("viewer", "", "watcher")
    br = webdriver.Browser()


def main():
    if os.geteuid() != 0:
        print("SKIP: the emulated allot-agents need root (cgroups, user switching)")
        sys.exit(SKIP)
    why = webdriver.available()
    if why:
        print("SKIP: " + why)
        sys.exit(SKIP)
    rc = 1
    try:
        setup()
        tests = [test_console_check_catches_errors, test_security_headers, test_helpers,
                 test_login_and_overview,
                 test_tenants,
                 test_jobs_page, test_live_update_and_cancel, test_gpu_map,
                 test_usage_and_invoices, test_idle_and_health, test_anomalies_and_fencing,
                 test_hidden_tab_makes_no_calls,
                 test_viewer_cannot_cancel, test_without_price_book,
                 test_member_sees_only_its_tenant]
        try:
            fx.run(tests)  # exits: 0 when every test passed
        except SystemExit as e:
            rc = e.code
    finally:
        # agents leave running tasks alone when stopped: cancel them and let them end first
        end = time.time() + 10
        for jid in jobs.values():
            try:
                dm.req("POST", "/v1/jobs/%d/cancel" % jid, token=dm.admin)
                while time.time() < end and dm.req("GET", "/v1/jobs/%d" % jid, token=dm.admin)[
                        1]["state"] in ("pending", "starting", "running"):
                    time.sleep(0.05)
            except (OSError, KeyError, TypeError):
                pass
        if br:
            if rc:
                print("---- chromedriver log\n" + br.driver_log())
            br.close()
        for ag in agents:
            try:
                ag.stop()
            except subprocess.TimeoutExpired:
                print("FAIL allot-agent %s did not stop" % ag.name)
                rc = 1
        if dm:
            try:
                dm.stop()  # also: no sanitizer report in its log
            except AssertionError as e:
                print("FAIL allotd: %s" % e)
                rc = 1
    sys.exit(rc)


if __name__ == "__main__":
    main()
