// Tenants: the tree with quotas (nominal, borrow and lend limits), weight and
// isolation; GPUs in use by the subtree's running jobs, borrowed beyond the
// nominal quota, left idle for others to borrow, or (an estimate) lent; the fair share the
// weights give among siblings against the share in use; this month's cost
// and budget from the invoice when allotd meters usage.

import {get, liveJobs, priceBook, session} from "../api.js";
import {quotaNominal} from "./overview.js";
import {fmtMoney, fmtNum, h, jobGpus, table, tenantTag, thisMonth} from "../util.js";

export const title = "Tenants";

/** Whether the tenant at path has siblings a tenant-bound token does not see:
 * it is the token's tenant or one of its ancestors (their siblings lie
 * outside the token's subtree). */
export function sharesUnseen(path, scope = session.scope) {
  return !!scope && (scope === path || scope.startsWith(path + "/"));
}

export function mount(root) {
  root.append(h("h1", null, "Tenants"));
  const body = h("div", {class: "body"});
  root.append(body);
  return {
    async refresh() {
      const [tn, jobs, book] = await Promise.all([get("/v1/tenants"), liveJobs(), priceBook()]);
      const invoice = book ? await get(`/v1/invoices?period=${thisMonth()}`) : null;
      body.replaceChildren(...render(tn, jobs, invoice));
    },
  };
}

const parentOf = (p) => (p.includes("/") ? p.slice(0, p.lastIndexOf("/")) : "");
const inSubtree = (t, root) => t === root || t.startsWith(root + "/");

function limits(t) {
  const q = t.quotas && t.quotas.gpu;
  return q && typeof q === "object" ? q : {};
}

function render(tn, jobs, invoice) {
  const tenants = (tn.tenants || []).slice().sort((a, b) => a.path.localeCompare(b.path));
  const running = jobs.filter((j) => j.state === "running" || j.state === "starting");
  const use = new Map(tenants.map((t) => [t.path, running.filter((j) => inSubtree(j.tenant, t.path))
    .reduce((a, j) => a + jobGpus(j), 0)]));
  const pending = new Map(tenants.map((t) => [t.path,
    jobs.filter((j) => j.state === "pending" && inSubtree(j.tenant, t.path)).length]));
  const siblingsWeight = new Map();
  const siblingsUse = new Map();
  for (const t of tenants) {
    const p = parentOf(t.path);
    siblingsWeight.set(p, (siblingsWeight.get(p) || 0) + (t.weight ?? 1));
    siblingsUse.set(p, (siblingsUse.get(p) || 0) + use.get(t.path));
  }
  // Lent: what siblings borrow now, shared among the siblings with idle quota in
  // proportion to it (allotd does not say who lent to whom; an estimate).
  const borrowedOf = (t) => { const n = quotaNominal(t); return n === null ? 0 : Math.max(0, use.get(t.path) - n); };
  const idleOf = (t) => {
    const n = quotaNominal(t);
    let idle = n === null ? 0 : Math.max(0, n - use.get(t.path));
    if (limits(t).lend_limit !== undefined) idle = Math.min(idle, limits(t).lend_limit);
    return idle;
  };
  const lent = new Map();
  for (const p of new Set(tenants.map((t) => parentOf(t.path)))) {
    const group = tenants.filter((t) => parentOf(t.path) === p);
    const borrowed = group.reduce((a, t) => a + borrowedOf(t), 0);
    const idle = group.reduce((a, t) => a + idleOf(t), 0);
    for (const t of group) lent.set(t.path, idle > 0 ? Math.min(idleOf(t), borrowed * idleOf(t) / idle) : 0);
  }
  const cost = new Map();
  if (invoice) for (const t of invoice.tenants || []) cost.set(t.tenant, t);
  const cur = invoice ? invoice.currency : "";
  const rows = tenants.map((t) => {
    const nominal = quotaNominal(t);
    const u = use.get(t.path);
    const lim = limits(t);
    const borrowed = borrowedOf(t);
    const idle = idleOf(t);
    const p = parentOf(t.path);
    const share = (t.weight ?? 1) / (siblingsWeight.get(p) || 1);
    const inUse = siblingsUse.get(p) ? u / siblingsUse.get(p) : 0;
    // a tenant's own lines, or its subtree's total (an organisation bills
    // through its teams); its budget, also with nothing spent yet
    const own = cost.get(t.path);
    const subtotal = invoice && invoice.subtrees ? invoice.subtrees[t.path] : undefined;
    const spent = subtotal !== undefined ? subtotal : own ? own.total_minor : undefined;
    const c = spent === undefined && !(invoice && invoice.budgets && t.path in invoice.budgets)
      ? null : {total_minor: spent || 0};
    const budget = invoice && invoice.budgets && t.path in invoice.budgets
      ? invoice.budgets[t.path] : own ? own.budget_minor : null;
    return h("tr", {"data-tenant": t.path, class: borrowed > 0 ? "borrowing" : null},
      h("td", {style: {paddingLeft: 6 + 16 * (t.path.split("/").length - 1) + "px"}}, tenantTag(t.path)),
      h("td", {class: "num"}, nominal === null ? "-" : fmtNum(nominal, 2)),
      h("td", {class: "num"}, lim.borrow_limit ?? "-"),
      h("td", {class: "num"}, lim.lend_limit ?? "-"),
      h("td", {class: "num", "data-col": "use"}, fmtNum(u, 2)),
      h("td", {class: "num", "data-col": "borrowed"}, fmtNum(borrowed, 2)),
      h("td", {class: "num", "data-col": "lendable"}, fmtNum(idle, 2)),
      h("td", {class: "num", "data-col": "lent", title: "what its siblings borrow, shared by idle quota (an estimate)"},
        fmtNum(lent.get(t.path), 2)),
      h("td", {class: "num"}, fmtNum(t.weight ?? 1, 1)),
      // a tenant-bound token does not see its tenant's siblings: no share to give
      sharesUnseen(t.path)
        ? h("td", {class: "num", title: "its siblings are not visible to this token"}, "-")
        : h("td", {class: "num", title: "weight share among siblings / share of their GPUs in use"},
          `${Math.round(share * 100)}% / ${Math.round(inUse * 100)}%`),
      h("td", null, t.isolation || "shared"),
      h("td", {class: "num"}, pending.get(t.path)),
      h("td", {class: "num", "data-col": "cost"}, c ? fmtMoney(c.total_minor, cur) : "-"),
      h("td", {class: "num", "data-col": "budget"}, budget === null || budget === undefined ? "-"
        : h("span", {class: c.total_minor > budget ? "over" : null},
          `${fmtMoney(budget, cur)} (${Math.round(c.total_minor / Math.max(1, budget) * 100)}%)`)));
  });
  const out = [
    table(["Tenant", "Nominal GPUs", "Borrow limit", "Lend limit", "In use", "Borrowed",
      "Idle quota", "Lent (est.)", "Weight", "Fair share / use", "Isolation", "Pending", "Cost " + thisMonth(), "Budget"],
    rows, {id: "tenants"}),
    h("p", {class: "note"}, "In use: GPUs held by the subtree's running jobs (MIG slices and fractions count their share). ",
      "Borrowed: beyond the nominal quota, taken back when the owner needs it. Idle quota: nominal GPUs not in use, ",
      "which others may borrow (up to the lend limit). Lent: what the siblings borrow now, shared among those with idle quota in proportion to it ",
      "(allotd does not record who lent to whom). Fair share: the tenant's weight among its siblings, ",
      "against its share of the GPUs they use now."),
  ];
  if (!invoice) out.push(h("p", {class: "note", id: "no-metering"}, "Cost and budget appear once an admin sets a price book (allot pricebook apply)."));
  if (tn.priority_classes && tn.priority_classes.length) {
    out.push(h("h2", null, "Priority classes"), table(["Class", "Value", "Preemptible"],
      tn.priority_classes.map((c) => h("tr", null, h("td", null, c.name), h("td", {class: "num"}, c.value),
        h("td", null, c.preemptible ? "yes" : "no")))));
  }
  return out;
}
