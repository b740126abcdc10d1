// Cluster overview: GPUs by state, model and tenant; the queue (length,
// wait, the longest-waiting jobs with their pending reason); nodes by state.

import {get, liveJobs, session} from "../api.js";
import {stackedBar} from "../charts.js";
import {gpuMap, totals} from "../model.js";
import {fmtDuration, fmtNum, h, nowSec, table, tenantColor, tenantTag} from "../util.js";

export const title = "Overview";

export const STATE_COLORS = {
  whole: "#3b6fd8", mig: "#8a5cd6", fraction: "#19a0a8", free: "#d5dbe3", unhealthy: "#d64545",
};

export function mount(root) {
  root.append(h("h1", null, "Cluster overview"));
  const body = h("div", {class: "body"});
  root.append(body);
  return {
    async refresh() {
      const [n, jobs, tn] = await Promise.all([get("/v1/nodes"), liveJobs(), get("/v1/tenants")]);
      body.replaceChildren(...render(n.nodes, jobs, tn.tenants || []));
    },
  };
}

function card(label, value, sub, id) {
  return h("div", {class: "card", "data-card": id}, h("div", {class: "label"}, label),
    h("div", {class: "value"}, value), sub ? h("div", {class: "sub"}, sub) : null);
}

function render(nodes, jobs, tenants) {
  const map = gpuMap(nodes, jobs);
  const {byState, byModel, byTenant} = totals(map, jobs);
  const gpus = Object.values(byState).reduce((a, b) => a + b, 0);
  const pending = jobs.filter((j) => j.state === "pending");
  const now = nowSec();
  const waits = pending.map((j) => now - j.submit_time).sort((a, b) => a - b);
  const median = waits.length ? waits[Math.floor(waits.length / 2)] : null;
  const running = jobs.filter((j) => j.state === "running" || j.state === "starting").length;
  const nodeStates = {};
  for (const n of nodes) nodeStates[n.state] = (nodeStates[n.state] || 0) + 1;
  const nominal = new Map(tenants.map((t) => [t.path, quotaNominal(t)]));
  for (const t of tenants) if (!byTenant.has(t.path)) byTenant.set(t.path, {tenant: t.path, gpus: 0, running: 0, pending: 0});

  return [
    h("div", {class: "cards"},
      card("GPUs", String(gpus), `${nodes.length} nodes: ` +
        (Object.entries(nodeStates).map(([k, v]) => `${v} ${k}`).join(", ") || "none"), "gpus"),
      card("GPUs in use", String(gpus - byState.free - byState.unhealthy),
        `${byState.whole} whole, ${byState.mig} MIG, ${byState.fraction} fraction`, "in-use"),
      card("Running jobs", String(running), null, "running"),
      card("Queue", String(pending.length), pending.length
        ? `wait: median ${fmtDuration(median)}, longest ${fmtDuration(waits[waits.length - 1])}`
        : "nothing waits", "queue")),
    session.scope ? h("p", {class: "note", id: "scope-note"}, `This token sees the jobs of ${session.scope} only: `,
      "GPUs that other tenants use count as free here.") : null,
    h("h2", null, "GPUs by state"),
    stackedBar(Object.entries(byState).map(([k, v]) => ({label: k, value: v, color: STATE_COLORS[k]}))),
    h("div", {class: "cols"},
      h("div", null, h("h2", null, "By model"),
        table(["Model", "GPUs", session.scope ? "In use by " + session.scope : "In use",
          session.scope ? "Not in use by it" : "Free", "Unhealthy"],
          [...byModel.values()].map((m) => h("tr", {"data-model": m.model},
            h("td", null, m.model), h("td", {class: "num"}, m.gpus), h("td", {class: "num"}, fmtNum(m.used, 2)),
            h("td", {class: "num"}, fmtNum(m.gpus - m.used - m.unhealthy, 2)), h("td", {class: "num"}, m.unhealthy))),
          {id: "by-model"})),
      h("div", null, h("h2", null, "By tenant"),
        table(["Tenant", "GPUs in use", "Nominal", "Running", "Pending"],
          [...byTenant.values()].sort((a, b) => b.gpus - a.gpus || a.tenant.localeCompare(b.tenant)).map((t) =>
            h("tr", {"data-tenant": t.tenant}, h("td", null, tenantTag(t.tenant)),
              h("td", {class: "num"}, h("span", {class: "bar", style: {
                width: Math.min(100, t.gpus * 20) + "px", background: tenantColor(t.tenant)}}), " ", fmtNum(t.gpus, 2)),
              h("td", {class: "num"}, nominal.has(t.tenant) ? fmtNum(nominal.get(t.tenant), 2) : "-"),
              h("td", {class: "num"}, t.running), h("td", {class: "num"}, t.pending))),
          {id: "by-tenant"}))),
    h("h2", null, "Longest waiting"),
    table(["Job", "Tenant", "Waiting", "Reason"],
      pending.sort((a, b) => a.submit_time - b.submit_time).slice(0, 10).map((j) =>
        h("tr", {"data-job": j.id}, h("td", null, h("a", {href: `#/jobs?job=${j.id}`}, `${j.id} ${j.name || ""}`)),
          h("td", null, tenantTag(j.tenant)), h("td", null, fmtDuration(now - j.submit_time)),
          h("td", {class: "reason"}, j.pending_reason || "waiting for the next cycle"))),
      {id: "queue"}),
  ];
}

/** A tenant's nominal GPUs from its quotas ({"gpu": N} or {"gpu": {nominal}}). */
export function quotaNominal(t) {
  const q = t.quotas && t.quotas.gpu;
  if (q === undefined || q === null) return null;
  return typeof q === "object" ? (q.nominal ?? null) : q;
}
