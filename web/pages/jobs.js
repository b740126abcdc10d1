// Jobs: the live jobs by default, or filtered by state ("all" walks the
// whole history) and tenant, kept in the hash (#/jobs?state=pending),
// a name filter, the pending reason, the placement; a job's details with its
// events, its task logs (read through allotd with the token), a cancel
// button and, while it waits, a choice of its priority class. allotd
// decides who may cancel or change a class: a refusal (a viewer) is shown
// and the controls go away until the token changes.

import {ApiError, allJobs, get, getText, liveJobs, newestJobs, post, session} from "../api.js";
import {LIVE, fmtDuration, fmtNum, fmtTime, h, jobGpus, nowSec, table, tenantTag} from "../util.js";

export const title = "Jobs";
const ROWS_MAX = 1000;
const STATES = ["pending", "starting", "running", "succeeded", "failed", "cancelled", "lost"];

export function shape(spec) {
  const tasks = spec.tasks && spec.tasks > 1 ? `${spec.tasks} × ` : "";
  if (spec.mig) return tasks + "MIG " + spec.mig;
  if (spec.gpu_milli) return tasks + `${fmtNum(spec.gpu_milli / 1000, 3)} GPU` +
    (spec.gpu_memory ? ` ${fmtNum(spec.gpu_memory / 1024, 1)} GiB` : "");
  if (spec.gpus) return tasks + `${spec.gpus} GPU${spec.gpus > 1 ? "s" : ""}`;
  return tasks + "CPU only";
}

/** An argument as a shell would need it typed: quoted unless plain. */
export function shellWord(a) {
  return /^[A-Za-z0-9_@%+=:,./-]+$/.test(a) ? a : "'" + String(a).replace(/'/g, "'\\''") + "'";
}

export function placementText(j) {
  if (!j.placement) return "-";
  return (j.placement.tasks || []).map((t) => {
    let what = (t.gpus || []).length ? `${t.node}:${t.gpus.join(",")}` : t.node;
    if (t.mig_profile) what += ` ${t.mig_profile}@${t.mig_start}`;
    else if (t.gpu_milli && t.gpu_milli < 1000) what += ` (${t.gpu_milli}‰)`;
    return what;
  }).join("; ");
}

export function mount(root, params, ctx) {
  const state = h("select", {id: "f-state"}, h("option", {value: ""}, "live (pending, starting, running)"),
    h("option", {value: "all"}, "all states"), STATES.map((s) => h("option", {value: s}, s)));
  const tenant = h("select", {id: "f-tenant"}, h("option", {value: ""}, "all tenants"));
  const name = h("input", {id: "f-name", type: "search", placeholder: "name contains"});
  state.value = params.get("state") || "";
  name.value = params.get("name") || "";
  let selected = Number(params.get("job")) || 0;
  let tenantWanted = params.get("tenant") || "";
  const msg = h("p", {class: "error", id: "jobs-msg", role: "alert"});
  const note = h("p", {class: "note"});
  const cut = h("p", {class: "note"});
  const list = h("div", {class: "body"});
  const detail = h("div", {class: "detail", id: "job-detail"});
  let last = [];
  let scrollTo = false; // bring the details into view once they are drawn
  let armed = {id: 0, until: 0}; // the cancel button clicked once (kept across refreshes)
  let classes = null; // the priority classes' names, asked once per page

  function save() {
    const p = new URLSearchParams();
    if (state.value) p.set("state", state.value);
    if (tenant.value) p.set("tenant", tenant.value);
    if (name.value) p.set("name", name.value);
    if (selected) p.set("job", selected);
    ctx.setParams(p);
  }
  const changed = () => { tenantWanted = tenant.value; save(); ctx.refresh(); };
  state.addEventListener("change", changed);
  tenant.addEventListener("change", changed);
  name.addEventListener("input", () => { save(); list.replaceChildren(renderList(last)); });

  root.append(h("h1", null, "Jobs"),
    h("div", {class: "filters"}, h("label", null, "State ", state), h("label", null, "Tenant ", tenant),
      h("label", null, "Name ", name)), msg, note, cut, list, detail);

  async function cancel(j, btn) {
    if (armed.id !== j.id || Date.now() > armed.until) { // two clicks: no modal dialog
      armed = {id: j.id, until: Date.now() + 4000};
      btn.dataset.armed = "1";
      btn.textContent = "confirm cancel";
      setTimeout(() => {
        const b = list.querySelector(`tr[data-job="${j.id}"] button.cancel`); // this one, or its redraw
        if (b && Date.now() > armed.until) {
          b.dataset.armed = "";
          b.textContent = "cancel";
        }
      }, 4100);
      return;
    }
    armed = {id: 0, until: 0};
    btn.disabled = true;
    try {
      await post(`/v1/jobs/${j.id}/cancel`);
      msg.textContent = "";
    } catch (e) {
      if (e instanceof ApiError && e.status === 403) session.mayCancel = false;
      msg.textContent = `Cannot cancel job ${j.id}: ${e.message}`;
    }
    ctx.refresh();
  }

  async function setClass(j, sel) {
    sel.disabled = true;
    try {
      await post(`/v1/jobs/${j.id}/priority`, {priority: sel.value});
      msg.textContent = "";
    } catch (e) {
      if (e instanceof ApiError && e.status === 403) session.mayCancel = false;
      msg.textContent = `Cannot change the class of job ${j.id}: ${e.message}`;
    }
    ctx.refresh();
  }

  /** The class a job asks for: a choice while it waits (not for a viewer), else text. */
  async function classControl(j) {
    const cur = (j.spec && j.spec.priority) || "";
    if (!session.mayCancel || j.state !== "pending") return cur || "(default)";
    if (!classes) {
      try {
        classes = ((await get("/v1/priority-classes")).priority_classes || []).map((c) => c.name);
      } catch (e) { // the details still show, with the class as text
        return cur || "(default)";
      }
    }
    const names = cur && !classes.includes(cur) ? [cur, ...classes] : classes;
    const sel = h("select", {id: "job-priority", "aria-label": "priority class"},
      cur ? null : h("option", {value: ""}, "(default)"), names.map((n) => h("option", {value: n}, n)));
    sel.value = cur;
    sel.addEventListener("change", () => { if (sel.value) setClass(j, sel); });
    return sel;
  }

  function select(id) {
    selected = selected === id ? 0 : id;
    scrollTo = selected !== 0;
    save();
    ctx.refresh();
  }

  function renderList(jobs) {
    const want = name.value.trim().toLowerCase();
    const now = nowSec();
    const matching = jobs.filter((j) => !want || (j.name || "").toLowerCase().includes(want));
    const shown = matching.slice(-ROWS_MAX); // the newest: a table of 20,000 rows every 3 s is too slow
    cut.textContent = matching.length > shown.length
      ? `The newest ${shown.length} of ${matching.length} jobs; filter to see the others.` : "";
    return table(["ID", "Name", "User", "Tenant", "State", "Asks", "Placement", "Submitted", "Waited / ran", "Reason", ""],
      shown.slice().reverse().map((j) => {
        const waited = (j.start_time || now) - j.submit_time;
        const ran = j.start_time ? (j.end_time || now) - j.start_time : null;
        return h("tr", {"data-job": j.id, "data-state": j.state, class: j.id === selected ? "selected" : null},
          h("td", {class: "num"}, j.id),
          h("td", {class: "name"}, h("a", {href: "#", onclick: (e) => { e.preventDefault(); select(j.id); }},
            j.name || "(no name)")),
          h("td", {class: "user"}, j.user || "—"),
          h("td", null, tenantTag(j.tenant)),
          h("td", null, h("span", {class: "state " + j.state}, j.state)),
          h("td", null, shape(j.spec || {})),
          h("td", {class: "placement"}, placementText(j)),
          h("td", null, fmtTime(j.submit_time)),
          h("td", null, fmtDuration(waited) + (ran !== null ? " / " + fmtDuration(ran) : "")),
          h("td", {class: "reason"}, j.pending_reason || (j.state === "pending" ? "waiting for the next cycle" : "")),
          h("td", {class: "actions"},
            session.mayCancel && LIVE.includes(j.state)
              ? h("button", {type: "button", class: "cancel", onclick: (e) => cancel(j, e.currentTarget),
                "data-armed": armed.id === j.id && Date.now() <= armed.until ? "1" : null},
              armed.id === j.id && Date.now() <= armed.until ? "confirm cancel" : "cancel")
              : null));
      }), {id: "jobs"});
  }

  async function renderDetail(j) {
    if (!j) return [];
    if (j.spec && j.spec.script_bytes) j = await get(`/v1/jobs/${j.id}`); /* lists leave scripts out */
    const ev = await get(`/v1/jobs/${j.id}/events?limit=1000`);
    const logBox = h("pre", {class: "logs", id: "job-logs", hidden: true});
    const tasks = (j.placement && j.placement.tasks) || [];
    const logLinks = tasks.map((t) => h("a", {href: `/v1/jobs/${j.id}/logs?task=${t.task}`, class: "logs-link",
      onclick: async (e) => {
        e.preventDefault();
        const box = detail.querySelector("#job-logs") || logBox; // the box kept across refreshes
        box.hidden = false;
        box.textContent = "loading…";
        try {
          const text = await getText(`/v1/jobs/${j.id}/logs?task=${t.task}&offset=0`);
          box.textContent = text || "(empty)";
        } catch (err) {
          box.textContent = "Cannot read the log: " + err.message;
        }
      }}, `logs of task ${t.task}`));
    return [
      h("h2", null, `Job ${j.id} ${j.name || ""}`),
      h("dl", {class: "kv"},
        h("dt", null, "tenant"), h("dd", null, tenantTag(j.tenant)),
        h("dt", null, "user"), h("dd", null, j.user || "—"),
        h("dt", null, "state"), h("dd", null, j.state + (j.exit_code !== null && j.exit_code !== undefined ? ` (exit ${j.exit_code})` : "")),
        h("dt", null, "asks"), h("dd", null, shape(j.spec || {})),
        h("dt", null, "priority class"), h("dd", null, await classControl(j)),
        h("dt", null, "placement"), h("dd", null, placementText(j)),
        h("dt", null, "GPUs held"), h("dd", null, fmtNum(jobGpus(j), 3)),
        h("dt", null, j.spec && j.spec.script ? "arguments" : "command"), h("dd", null, h("code", null, ((j.spec && j.spec.command) || []).map(shellWord).join(" "))),
        j.spec && j.spec.script ? h("dt", null, "script") : null,
        j.spec && j.spec.script ? h("dd", null, h("pre", {class: "script"}, j.spec.script)) : null),
      tasks.length ? h("p", null, logLinks) : null,
      logBox,
      h("h3", null, "Events"),
      table(["#", "Time", "Event", "Detail"], ev.events.map((e) => h("tr", {"data-event": e.kind},
        h("td", {class: "num"}, e.seq), h("td", null, fmtTime(e.time)), h("td", null, e.kind),
        h("td", null, e.detail || ""))), {id: "events"}),
    ];
  }

  let detailFor = 0;
  return {
    async refresh() {
      const fetchJobs = (t) => {
        const tq = t ? "&tenant=" + encodeURIComponent(t) + "&subtree=1" : "";
        // live states: every such job; a history (all states, or an end
        // state) grows without bound: its newest jobs, one page a refresh
        return !state.value ? liveJobs(tq)
          : LIVE.includes(state.value) ? allJobs("&state=" + state.value + tq)
            : newestJobs((state.value === "all" ? "" : "&state=" + state.value) + tq);
      };
      const tn = await get("/v1/tenants");
      const paths = (tn.tenants || []).map((t) => t.path).sort();
      if (tenantWanted && !paths.includes(tenantWanted)) { // a link to a tenant this token does not see
        msg.textContent = `No tenant ${tenantWanted} is visible to this token: showing all tenants.`;
        tenantWanted = "";
        save();
      }
      const jobs = await fetchJobs(tenantWanted);
      note.textContent = !jobs.truncated ? ""
        : LIVE.includes(state.value) || !state.value
          ? `Showing the first ${jobs.length} jobs in submission order; choose a state or a tenant to see the others.`
          : `Showing the newest ${jobs.length} jobs (allot ls lists every one).`;
      if (tenant.options.length !== paths.length + 1 || paths.some((p, i) => tenant.options[i + 1].value !== p)) {
        tenant.replaceChildren(h("option", {value: ""}, "all tenants"), ...paths.map((p) => h("option", {value: p}, p)));
      }
      tenant.value = tenantWanted;
      last = jobs;
      // a refresh keeps the keyboard where it was (the same link or button of the same job)
      const focused = document.activeElement && list.contains(document.activeElement)
        ? {job: document.activeElement.closest("tr") && document.activeElement.closest("tr").dataset.job,
          tag: document.activeElement.tagName} : null;
      list.replaceChildren(renderList(jobs));
      if (focused && focused.job) {
        const again = list.querySelector(`tr[data-job="${focused.job}"] ${focused.tag.toLowerCase()}`);
        if (again) again.focus();
      }
      let j = null;
      if (selected) {
        j = jobs.find((x) => x.id === selected) || null;
        if (!j) {
          try {
            j = await get(`/v1/jobs/${selected}`);
          } catch (e) { // a link to a job that is not there, or not this token's
            if (!(e instanceof ApiError) || e.status !== 404) throw e;
            msg.textContent = `No job ${selected} is visible to this token.`;
            selected = 0;
            save();
          }
        }
      }
      // a class being chosen (the choice focused) stays through refreshes of the same job
      const choosing = j && detailFor === j.id && document.activeElement &&
        document.activeElement.id === "job-priority" ? document.activeElement : null;
      // keep an open log box across refreshes of the same job
      if (j && detailFor === j.id && detail.querySelector("#job-logs:not([hidden])")) {
        const fresh = await renderDetail(j);
        const box = detail.querySelector("#job-logs");
        detail.replaceChildren(...fresh);
        detail.querySelector("#job-logs").replaceWith(box);
      } else {
        detail.replaceChildren(...await renderDetail(j));
      }
      const fresh = detail.querySelector("#job-priority");
      if (choosing && fresh && !choosing.disabled) {
        fresh.replaceWith(choosing);
        choosing.focus();
      }
      if (j && scrollTo) detail.scrollIntoView({block: "start"}); // a job chosen in a long list
      scrollTo = false;
      detailFor = j ? j.id : 0;
    },
  };
}
