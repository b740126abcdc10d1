// What the pages compute from the API's answers: which job holds which GPU
// (whole, MIG slice or fraction) on each node, and the cluster's totals.
// Only the jobs the caller may see are known: a member's token sees its own
// tenant's jobs, so other tenants' allocations are not on its map.

import {LIVE, taskGpus} from "./util.js";

// MIG memory slots per GPU and the slots a profile takes (A100/H100 geometry:
// 8 slots, 7 compute slices; 3g takes 4 slots, 7g all 8).
export const MIG_SLOTS = 8;
export const MIG_COMPUTE = 7;
/** The compute slices of a MIG profile ("3g.40gb": 3). */
export function migCompute(profile) {
  return Math.min(MIG_COMPUTE, parseInt(profile, 10) || 1);
}
export function migSize(profile, given) {
  if (given) return given;
  const g = parseInt(profile, 10) || 1;
  return ({1: 1, 2: 2, 3: 4, 4: 4, 7: 8})[g] || g;
}

/**
 * nodes, jobs -> Map node name -> array of GPU slots:
 * {index, model, uuid, health, text, whole: job|null, fracs: [{job, milli, memory}],
 *  mig: [{job|null, profile, start, size}]}.
 * MIG instances come from the node's reported layout (health.gpus[].mig),
 * matched to the visible jobs by start; an instance with no visible job is
 * another tenant's, or idle.
 */
export function gpuMap(nodes, jobs) {
  const map = new Map();
  for (const n of nodes) {
    const inv = (n.inventory && n.inventory.gpus) || [];
    const hg = (n.health && n.health.gpus) || [];
    const slots = inv.map((g, i) => {
      // the agent's health list is by NVML index; match by UUID where both have one
      const r = hg.find((x) => g.uuid && x.uuid === g.uuid) || hg.find((x) => x.index === i) || {};
      return {
        index: i, model: g.model, uuid: g.uuid || r.uuid || "",
        health: r.health || "unknown", text: r.text || "",
        whole: null, fracs: [],
        mig: (r.mig || []).map((m) => ({job: null, profile: m.profile, start: m.start,
          size: migSize(m.profile, m.size)})),
      };
    });
    map.set(n.name, slots);
  }
  for (const j of jobs) {
    if (!LIVE.includes(j.state) || !j.placement) continue;
    for (const t of j.placement.tasks || []) {
      const slots = map.get(t.node);
      if (!slots) continue;
      for (const gi of t.gpus || []) {
        const g = slots[gi];
        if (!g) continue;
        if (t.mig_profile) {
          let m = g.mig.find((x) => x.start === t.mig_start && x.profile === t.mig_profile);
          if (!m) {
            m = {job: null, profile: t.mig_profile, start: t.mig_start || 0, size: migSize(t.mig_profile)};
            g.mig.push(m);
          }
          m.job = j;
          m.milli = t.gpu_milli;
        } else if (t.gpu_milli && t.gpu_milli < 1000) {
          g.fracs.push({job: j, milli: t.gpu_milli, memory: t.gpu_memory});
        } else {
          g.whole = j;
        }
      }
    }
  }
  return map;
}

/** The state of one GPU slot: unhealthy, whole, mig, fraction or free. */
export function slotState(g) {
  if (g.health === "unhealthy") return "unhealthy";
  if (g.whole) return "whole";
  if (g.mig.some((m) => m.job)) return "mig";
  if (g.fracs.length) return "fraction";
  return "free";
}

/** Totals over a gpuMap: GPUs per state, per model, per tenant (in GPUs). */
export function totals(map, jobs) {
  const byState = {whole: 0, mig: 0, fraction: 0, free: 0, unhealthy: 0};
  const byModel = new Map();
  for (const slots of map.values()) {
    for (const g of slots) {
      const st = slotState(g);
      byState[st]++;
      const m = byModel.get(g.model) || {model: g.model, gpus: 0, used: 0, unhealthy: 0};
      m.gpus++;
      if (st === "unhealthy") m.unhealthy++;
      // a MIG instance's share of its GPU is its compute slices of 7 (a job's
      // gpu_milli, 142 for 1g, is rounded down: seven of them would read 0.994)
      m.used += g.whole ? 1 : Math.min(1, g.fracs.reduce((a, f) => a + f.milli / 1000, 0) +
        g.mig.filter((x) => x.job).reduce((a, x) => a + migCompute(x.profile), 0) / MIG_COMPUTE);
      byModel.set(g.model, m);
    }
  }
  const byTenant = new Map();
  for (const j of jobs) {
    const t = byTenant.get(j.tenant) || {tenant: j.tenant, gpus: 0, running: 0, pending: 0};
    if (j.state === "running" || j.state === "starting") {
      t.running++;
      t.gpus += ((j.placement && j.placement.tasks) || []).reduce((a, x) => a + taskGpus(x), 0);
    } else if (j.state === "pending") {
      t.pending++;
    }
    byTenant.set(j.tenant, t);
  }
  return {byState, byModel, byTenant};
}
