// Nodes: a GPU map. Each node is a row of GPU boxes: a whole GPU is filled
// with its job's tenant colour; a MIG GPU shows its instances as slices at
// their place (8 memory slots), each coloured by the tenant of the job in
// it; a shared GPU shows its fractions side by side by their share. The
// box's border is the GPU's health as the agent last reported it (the
// `allot nodes --gpus` view). A member sees only its own tenant's jobs.

import {allJobs, get} from "../api.js";
import {MIG_SLOTS, gpuMap, slotState} from "../model.js";
import {fmtDuration, fmtNum, h, nowSec, tenantColor, tenantInk, tenantTag} from "../util.js";

export const title = "Nodes";

export function mount(root) {
  root.append(h("h1", null, "Nodes and GPUs"),
    h("p", {class: "note"}, "Each box is a GPU; colours are tenants. Borders: ",
      h("span", {class: "health-key healthy"}, "healthy"), " ",
      h("span", {class: "health-key degraded"}, "degraded"), " ",
      h("span", {class: "health-key unhealthy"}, "unhealthy"), ". Hover a part for the job."));
  const body = h("div", {class: "body"});
  root.append(body);
  return {
    async refresh() {
      const [n, running, starting] = await Promise.all([get("/v1/nodes"),
        allJobs("&state=running"), allJobs("&state=starting")]);
      body.replaceChildren(...render(n.nodes, running.concat(starting)).filter(Boolean));
    },
  };
}

function jobLabel(j) {
  return `job ${j.id} ${j.name || ""} (${j.tenant})`;
}

function part(j, style, text, cls) {
  const ink = tenantInk(j.tenant); // dark text on the light hues: readable labels
  return h("a", {class: "part " + (cls || ""), href: `#/jobs?job=${j.id}`, style: Object.assign({background: tenantColor(j.tenant),
    color: ink, textShadow: ink === "#fff" ? null : "none"}, style),
    title: jobLabel(j), "data-tenant": j.tenant, "data-job": j.id}, text);
}

function gpuBox(g, mode) {
  const st = slotState(g);
  const inner = [];
  if (g.mig.length || mode === "mig") { // the 8 memory slots MIG instances are placed on
    for (let k = 1; k < MIG_SLOTS; k++) inner.push(h("span", {class: "slot-line", style: {left: k / MIG_SLOTS * 100 + "%"}}));
  }
  if (g.whole) {
    inner.push(part(g.whole, {left: "0", width: "100%"}, [g.whole.tenant, h("br"), g.whole.name || `job ${g.whole.id}`], "whole"));
  }
  for (const m of g.mig) {
    const style = {left: m.start / MIG_SLOTS * 100 + "%", width: m.size / MIG_SLOTS * 100 + "%"};
    inner.push(m.job ? part(m.job, style, `${m.job.tenant} ${m.profile}`, "mig")
      : h("span", {class: "part mig other", style, title: `${m.profile} instance (no job of yours)`}, m.profile));
  }
  let x = 0;
  for (const f of g.fracs) {
    const w = f.milli / 10;
    inner.push(part(f.job, {left: x + "%", width: w + "%"}, `${f.job.tenant} ${f.milli / 10}%`, "fraction"));
    x += w;
  }
  return h("div", {class: `gpu ${st} health-${g.health}`, "data-gpu": g.index, "data-uuid": g.uuid,
    "data-state": st, "data-health": g.health, title: `GPU ${g.index} ${g.model} ${g.uuid}\n${g.health}${g.text ? ": " + g.text : ""}`},
  h("div", {class: "gpu-head"}, h("span", null, `GPU ${g.index}`), h("span", {class: "model"}, g.model)),
  h("div", {class: "gpu-body"}, inner),
  h("div", {class: "gpu-foot"}, g.health === "healthy" ? "" : `${g.health}${g.text ? ": " + g.text : ""}`));
}

// The node's labels (its agent's --labels; the agent's own allot.io/ ones
// left out), which jobs select nodes by.
function nodeLabels(inv) {
  const l = Object.entries(inv.labels || {}).filter(([k]) => !k.startsWith("allot.io/"))
    .map(([k, v]) => (v ? `${k}=${v}` : k));
  return l.length ? h("span", {class: "labels", title: "node labels: jobs select nodes by them (allot submit --constraint)"},
    "labels " + l.join(", ")) : null;
}

function render(nodes, jobs) {
  const map = gpuMap(nodes, jobs);
  const now = nowSec();
  const tenants = new Set(jobs.map((j) => j.tenant));
  return [
    h("div", {class: "legend"}, [...tenants].sort().map((t) => tenantTag(t))),
    ...nodes.map((n) => {
      const inv = n.inventory || {};
      const gpus = map.get(n.name) || [];
      const used = gpus.filter((g) => !["free", "unhealthy"].includes(slotState(g))).length;
      const bad = gpus.filter((g) => g.health === "unhealthy").length;
      return h("section", {class: "node state-" + n.state, "data-node": n.name},
        h("div", {class: "node-head"},
          h("strong", null, n.name),
          h("span", {class: "state " + n.state}, n.state),
          n.fenced ? h("span", {class: "state fenced", title: n.fenced}, "fenced: " + n.fenced) : null,
          h("span", null, `${gpus.length} × ${gpus.length ? gpus[0].model : "no GPU"}`),
          h("span", null, `mode ${inv.gpu_mode || "shared"}`),
          nodeLabels(inv),
          h("span", null, `${fmtNum(inv.cpus, 1)} CPUs, ${fmtNum((inv.memory || 0) / 1024, 1)} GiB`),
          h("span", null, `${n.tasks} task${n.tasks === 1 ? "" : "s"}, ${used} GPU${used === 1 ? "" : "s"} in use` +
            (bad ? `, ${bad} unhealthy` : "")),
          h("span", {class: "muted"}, "heartbeat " + fmtDuration(now - n.last_heartbeat) + " ago")),
        h("div", {class: "gpus"}, gpus.length ? gpus.map((g) => gpuBox(g, inv.gpu_mode)) : h("p", {class: "muted"}, "no GPUs")));
    }),
    nodes.length ? null : h("p", {class: "empty"}, "No node has registered yet."),
  ];
}
