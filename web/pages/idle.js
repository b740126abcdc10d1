// Idle, anomalies and health: the running jobs allotd flags idle (GPUs held
// under the utilisation threshold for their class's window, with the
// GPU-hours held idle), the anomalies of its last metering pass (a tenant's
// use far above its own history, a job whose utilisation or memory changed
// abruptly), the GPUs their agents report degraded or unhealthy, and the
// nodes that are not ready or are fenced (an unhealthy GPU: no new work).

import {get, liveJobs} from "../api.js";
import {fmtDuration, fmtNum, fmtQty, h, nowSec, table, tenantTag} from "../util.js";

export const title = "Idle, anomalies & health";

export function mount(root) {
  root.append(h("h1", null, "Idle jobs, anomalies and GPU health"));
  const body = h("div", {class: "body"});
  root.append(body);
  return {
    async refresh() {
      const [idle, anomalies, n, live] = await Promise.all([get("/v1/idle"), get("/v1/anomalies"),
        get("/v1/nodes"), liveJobs()]);
      body.replaceChildren(...render(idle, anomalies.anomalies || [], n.nodes,
        new Map(live.map((j) => [j.id, j.name]))));
    },
  };
}

function render(idle, anomalies, nodes, names) {
  const now = nowSec();
  const jobs = idle.jobs || [];
  const wasted = jobs.reduce((a, j) => a + (j.wasted_gpu_hours || 0), 0);
  const gpus = [];
  for (const n of nodes) {
    for (const g of (n.health && n.health.gpus) || []) {
      if (g.health && g.health !== "healthy") gpus.push({node: n.name, ...g});
    }
  }
  const notReady = nodes.filter((n) => n.state !== "ready" || n.fenced);
  return [
    h("div", {class: "cards"},
      h("div", {class: "card", "data-card": "idle"}, h("div", {class: "label"}, "Idle jobs"),
        h("div", {class: "value"}, String(jobs.length)),
        h("div", {class: "sub"}, `${fmtQty(wasted)} GPU-hours held idle`)),
      h("div", {class: "card", "data-card": "anomalies"}, h("div", {class: "label"}, "Anomalies"),
        h("div", {class: "value"}, String(anomalies.length)),
        h("div", {class: "sub"}, anomalies.map((a) => a.kind).filter((k, i, all) => all.indexOf(k) === i).join(", ") || "none")),
      h("div", {class: "card", "data-card": "unhealthy"}, h("div", {class: "label"}, "GPUs not healthy"),
        h("div", {class: "value"}, String(gpus.length)),
        h("div", {class: "sub"}, `${gpus.filter((g) => g.health === "unhealthy").length} unhealthy (fenced)`)),
      h("div", {class: "card", "data-card": "nodes"}, h("div", {class: "label"}, "Nodes not ready or fenced"),
        h("div", {class: "value"}, String(notReady.length)),
        h("div", {class: "sub"}, notReady.map((n) => `${n.name} ${n.fenced ? "fenced" : n.state}`).join(", ") || "all ready"))),
    h("h2", null, "Idle jobs"),
    h("p", {class: "note"}, `Running jobs holding whole GPUs or MIG instances whose measured utilisation stayed under `,
      `${fmtNum(idle.threshold)}% for ${fmtDuration(idle.window_s)} (or their class's window).`),
    table(["Job", "Tenant", "User", "Class", "GPUs", "Utilisation", "Idle for", "GPU-hours idle", "Preemptible"],
      jobs.slice().sort((a, b) => (b.wasted_gpu_hours || 0) - (a.wasted_gpu_hours || 0)).map((j) =>
        h("tr", {"data-job": j.job},
          h("td", null, h("a", {href: `#/jobs?state=all&job=${j.job}`}, `${j.job} ${names.get(j.job) || ""}`)),
          h("td", null, tenantTag(j.tenant)), h("td", null, j.user || "-"), h("td", null, j.class || "-"),
          h("td", {class: "num"}, fmtNum(j.gpus, 3)),
          h("td", {class: "num"}, j.util_avg === null || j.util_avg === undefined ? "-" : fmtNum(j.util_avg, 1) + "%"),
          h("td", null, j.idle_since ? fmtDuration(now - j.idle_since) : "-"),
          h("td", {class: "num"}, fmtQty(j.wasted_gpu_hours)),
          h("td", null, j.preemptible ? "yes" : "no"))),
      {id: "idle"}),
    h("h2", null, "Anomalies"),
    h("p", {class: "note"}, "A tenant whose GPU use in the last hour is far above its own hourly history ",
      "(robust z-score), or a running job whose GPU utilisation or memory changed abruptly."),
    table(["Kind", "Tenant", "Job", "Detail", "Score", "Since"],
      anomalies.map((a) => h("tr", {"data-kind": a.kind, "data-job": a.job ?? null},
        h("td", null, a.kind), h("td", null, tenantTag(a.tenant)),
        h("td", null, a.job ? h("a", {href: `#/jobs?state=all&job=${a.job}`}, `${a.job} ${names.get(a.job) || ""}`) : "-"),
        h("td", null, a.detail || ""), h("td", {class: "num"}, a.score === null || a.score === undefined ? "-" : fmtNum(a.score, 1)),
        h("td", null, a.since ? fmtDuration(now - a.since) + " ago" : "-"))),
      {id: "anomalies"}),
    h("h2", null, "GPUs not healthy"),
    table(["Node", "GPU", "Model", "UUID", "Health", "Why"],
      gpus.map((g) => h("tr", {"data-uuid": g.uuid, class: "health-" + g.health},
        h("td", null, g.node), h("td", {class: "num"}, g.index), h("td", null, g.model),
        h("td", null, h("code", null, g.uuid)), h("td", null, h("span", {class: "state " + g.health}, g.health)),
        h("td", null, g.text || ""))), {id: "gpu-health"}),
    h("h2", null, "Nodes not ready or fenced"),
    table(["Node", "State", "Fenced", "Last heartbeat", "Tasks"],
      notReady.map((n) => h("tr", {"data-node": n.name}, h("td", null, n.name),
        h("td", null, h("span", {class: "state " + n.state}, n.state)),
        h("td", {class: "reason"}, n.fenced || ""),
        h("td", null, fmtDuration(now - n.last_heartbeat) + " ago"), h("td", {class: "num"}, n.tasks))),
      {id: "not-ready"}),
  ];
}
