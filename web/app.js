// The dashboard's shell: sign-in, hash routing (#/overview, #/jobs?state=...),
// and live updates. The shown page is refreshed every POLL_MS (or its own
// pollMs) while the tab is visible; a hidden tab makes no calls. One
// refresh at a time.

import {ApiError, get, session, setToken, token} from "./api.js";
import * as overview from "./pages/overview.js";
import * as tenants from "./pages/tenants.js";
import * as jobs from "./pages/jobs.js";
import * as nodes from "./pages/nodes.js";
import * as usage from "./pages/usage.js";
import * as idle from "./pages/idle.js";

const PAGES = {overview, tenants, jobs, nodes, usage, idle};
const POLL_MS = 3000;

const $ = (id) => document.getElementById(id);
let current = null;   // {name, hash, view}: the page shown
let timer = 0;
let busy = false;
let generation = 0;   // bumped on every navigation: late answers are dropped

function route() {
  const raw = location.hash.replace(/^#\/?/, "");
  const [name, q] = raw.split("?");
  return {name: PAGES[name] ? name : "overview", params: new URLSearchParams(q || "")};
}

/** Changes the hash's query (filters) without adding history entries. */
function setParams(params) {
  const {name} = route();
  const q = params.toString();
  history.replaceState(null, "", `#/${name}${q ? "?" + q : ""}`);
  if (current) current.hash = location.hash;
}

function status(text, bad) {
  const el = $("status");
  el.textContent = text;
  el.classList.toggle("bad", !!bad);
}

let lastOk = ""; // when the shown page last read allotd

async function refresh() {
  if (!current || busy || document.hidden) return;
  busy = true;
  const gen = generation;
  try {
    await current.view.refresh();
    lastOk = new Date().toLocaleTimeString();
    if (gen === generation) status("updated " + lastOk);
  } catch (e) {
    if (e instanceof ApiError && e.status === 401) {
      logout("The token was refused: " + e.message);
      return;
    }
    // fetch's own failure: no answer at all (allotd down, or the network)
    const unreachable = !(e instanceof ApiError) && e instanceof TypeError;
    if (gen === generation) {
      status(unreachable ? "allotd cannot be reached" + (lastOk ? `: showing what it said at ${lastOk}` : "")
        : e.message, true);
    }
  } finally {
    busy = false;
  }
}

function schedule() {
  clearInterval(timer);
  timer = 0;
  if (!document.hidden && current) timer = setInterval(refresh, PAGES[current.name].pollMs || POLL_MS);
}

function show() {
  if (!token()) return showLogin();
  const {name, params} = route();
  if (current && current.hash === location.hash) return;
  generation++;
  if (current && current.view.unmount) current.view.unmount();
  const root = $("page");
  root.replaceChildren();
  root.dataset.page = name;
  for (const a of document.querySelectorAll("#nav a"))
    a.classList.toggle("active", a.dataset.page === name);
  document.title = "allot: " + PAGES[name].title;
  current = {name, hash: location.hash, view: PAGES[name].mount(root, params, {setParams, refresh})};
  busy = false;
  refresh();
  schedule();
}

function showLogin(message) {
  current = null;
  clearInterval(timer);
  $("page").replaceChildren();
  $("nav").hidden = true;
  $("logout").hidden = true;
  $("who").hidden = true;
  $("login").hidden = false;
  $("login-error").textContent = message || "";
  status("");
  $("token").focus();
}

function logout(message) {
  setToken("");
  showLogin(message);
}

async function login(ev) {
  ev.preventDefault();
  const t = $("token").value.trim();
  if (!t) {
    $("login-error").textContent = "Paste a token first.";
    return;
  }
  setToken(t);
  try {
    const me = await get("/v1/whoami"); // any token: what it is
    if (me.role === "agent") throw new ApiError(403, "forbidden");
  } catch (e) {
    setToken("");
    $("login-error").textContent = e instanceof ApiError && e.status === 403
      ? "This token's role cannot use the dashboard (agent tokens are for nodes)."
      : e instanceof ApiError && e.status === 401
        ? "Sign-in failed: allotd does not know this token (mistyped, or revoked)."
        : "Sign-in failed: " + e.message;
    return;
  }
  $("token").value = "";
  enter();
}

/* Shows who is signed in: the token's name, role and tenant. */
async function showWho() {
  try {
    const me = await get("/v1/whoami");
    session.scope = me.tenant || ""; // the pages say what such a token cannot see
    session.mayCancel = me.role !== "viewer"; // no button allotd would refuse
    $("who").textContent = me.name + " (" + me.role +
      (me.tenant ? ", " + me.tenant : ", all tenants") + ")";
    $("who").hidden = false;
  } catch (e) {
    $("who").hidden = true;
  }
}

function enter() {
  $("login").hidden = true;
  $("nav").hidden = false;
  $("logout").hidden = false;
  current = null;
  showWho().then(show); // the pages read what the token may see (session.scope)
}

document.addEventListener("visibilitychange", () => {
  if (!document.hidden) refresh();
  schedule();
});
window.addEventListener("hashchange", show);
$("login").addEventListener("submit", login);
$("logout").addEventListener("click", () => logout());
if (token()) enter();
else showLogin();
