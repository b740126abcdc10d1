// Usage and invoices: GPU-hours per tenant over time (by day for a month,
// or by hour for the last two days) from /v1/usage, totals per tenant, and
// the month's invoice from /v1/invoices with a CSV download; each line
// says which price book version priced it (its effective date). Money arrives
// in integer minor units and is formatted here. Without a price book there
// is no invoice (allotd answers 409): the page says so and does not ask.

import {get, getBlob, priceBook} from "../api.js";
import {stackedColumns} from "../charts.js";
import {fmtMoney, fmtNum, fmtQty, fmtRate, fmtTime, h, nowSec, table, tenantColor, tenantTag, thisMonth} from "../util.js";

export const title = "Usage & invoices";
export const pollMs = 15000; // allotd rolls usage up every --meter-interval (60 s by default)

function nextMonth(period) {
  let [y, m] = period.split("-").map(Number);
  m++;
  if (m > 12) { m = 1; y++; }
  return `${y}-${String(m).padStart(2, "0")}`;
}

/** Every "YYYY-MM-DD" of a month, or every "YYYY-MM-DDTHH" (UTC) of the last 48 hours. */
function axisKeys(by, period) {
  const keys = [];
  if (by === "day") {
    const [y, m] = period.split("-").map(Number);
    const days = new Date(Date.UTC(y, m, 0)).getUTCDate();
    for (let d = 1; d <= days; d++) keys.push(`${period}-${String(d).padStart(2, "0")}`);
  } else {
    const end = Math.floor(nowSec() / 3600) * 3600;
    for (let t = end - 47 * 3600; t <= end; t += 3600) keys.push(new Date(t * 1000).toISOString().slice(0, 13));
  }
  return keys;
}

export function mount(root, params, ctx) {
  const asked = params.get("period") || "";
  const month = h("input", {id: "f-period", type: "month",
    value: /^\d{4}-(0[1-9]|1[0-2])$/.test(asked) ? asked : thisMonth()}); // a bad link shows this month
  const by = h("select", {id: "f-by"}, h("option", {value: "day"}, "by day (the month)"),
    h("option", {value: "hour"}, "by hour (last 48 hours)"));
  by.value = params.get("by") === "hour" ? "hour" : "day";
  const save = () => {
    const p = new URLSearchParams();
    p.set("period", month.value || thisMonth());
    p.set("by", by.value);
    ctx.setParams(p);
    ctx.refresh();
  };
  month.addEventListener("change", save);
  by.addEventListener("change", save);
  const msg = h("p", {class: "error", role: "alert"});
  const body = h("div", {class: "body"});
  root.append(h("h1", null, "Usage and invoices"),
    h("div", {class: "filters"}, h("label", null, "Period ", month), h("label", null, "Chart ", by)), msg, body);

  async function download(period, btn) {
    btn.disabled = true;
    try {
      const blob = await getBlob(`/v1/invoices?period=${period}&format=csv`);
      const a = h("a", {href: URL.createObjectURL(blob), download: `allot-invoice-${period}.csv`});
      document.body.append(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(a.href), 10000);
      msg.textContent = "";
    } catch (e) {
      msg.textContent = "Cannot download the invoice: " + e.message;
    }
    btn.disabled = false;
  }

  return {
    async refresh() {
      const period = /^\d{4}-\d{2}$/.test(month.value) ? month.value : thisMonth();
      const range = by.value === "day"
        ? `from=${period}-01&to=${nextMonth(period)}-01`
        : `from=${nowSec() - 48 * 3600}&to=${nowSec()}`;
      const whole = `from=${period}-01&to=${nextMonth(period)}-01`;
      const [series, totals, models, book] = await Promise.all([
        get(`/v1/usage?${range}&by=${by.value}&split=tenant`),
        get(`/v1/usage?${whole}&by=tenant`),
        get(`/v1/usage?${whole}&by=model`),
        priceBook(),
      ]);
      const inv = book ? await get(`/v1/invoices?period=${period}`) : null;
      body.replaceChildren(...render(period, by.value, series, totals, models, inv, download));
    },
  };
}

function render(period, by, series, totals, models, inv, download) {
  const keys = axisKeys(by, period);
  const perTenant = new Map();
  for (const r of series.rows || []) {
    const t = r.tenant || "all";
    if (!perTenant.has(t)) perTenant.set(t, new Map());
    const v = perTenant.get(t);
    v.set(r.key, (v.get(r.key) || 0) + (r.gpu_hours || 0));
    if (!keys.includes(r.key)) keys.push(r.key);
  }
  keys.sort();
  const chart = stackedColumns(keys, [...perTenant.keys()].sort().map((t) =>
    ({name: t, color: tenantColor(t), values: perTenant.get(t)})),
  {unit: " GPU-h", title: `GPU-hours per tenant, ${by === "day" ? "by day, " + period : "by hour (UTC), last 48 hours"}`});
  chart.id = "usage-chart";
  const trow = (key, r, attrs) => h("tr", attrs,
    h("td", null, key), h("td", {class: "num"}, fmtQty(r.gpu_hours)),
    h("td", {class: "num"}, fmtQty((r.cpu_core_seconds || 0) / 3600)),
    h("td", {class: "num"}, fmtQty((r.memory_gib_seconds || 0) / 3600)),
    h("td", {class: "num"}, r.sm_util_avg === null || r.sm_util_avg === undefined ? "-" : fmtNum(r.sm_util_avg, 1) + "%"),
    h("td", {class: "num"}, r.gpu_memory_peak_bytes ? fmtNum(r.gpu_memory_peak_bytes / 2 ** 30, 1) + " GiB" : "-"),
    h("td", {class: "num"}, r.energy_joules ? fmtQty(r.energy_joules / 3.6e6) + " kWh" : "-"),
    h("td", {class: "num"}, r.jobs));
  const out = [
    chart,
    h("h2", null, `Usage in ${period}`),
    table(["Tenant", "GPU-hours", "CPU core-hours", "Memory GiB-hours", "SM util", "GPU mem peak", "Energy", "Jobs"],
      (totals.rows || []).map((r) => trow(tenantTag(r.key), r, {"data-tenant": r.key}))
        .concat(totals.totals ? [trow("total", totals.totals, {class: "total"})] : []), {id: "usage-totals"}),
    h("h3", null, "By GPU model"),
    table(["GPU model", "GPU-hours", "CPU core-hours", "Memory GiB-hours", "SM util", "GPU mem peak", "Energy", "Jobs"],
      (models.rows || []).map((r) => trow(r.key, r, {"data-model": r.key})), {id: "usage-models"}),
    h("p", {class: "note"}, "GPU-hours count GPU-equivalents: a MIG instance its share of the GPU's compute slices, ",
      "a fraction its share of the GPU. Days and hours are UTC.", series.as_of ? ` Up to date as of ${fmtTime(series.as_of)}.` : ""),
  ];
  if (!inv) {
    out.push(h("h2", null, `Invoice ${period}`), h("p", {class: "note", id: "no-price-book"},
      "No price book is set, so there is no invoice: an admin sets one with allot pricebook apply -f FILE (docs/billing.md)."));
    return out;
  }
  const cur = inv.currency || "";
  const btn = h("button", {type: "button", id: "csv", onclick: (e) => download(period, e.currentTarget)}, "Download CSV");
  const money = (x) => h("td", {class: "num"}, fmtMoney(x, cur));
  const rows = (inv.tenants || []).flatMap((t) => [
    ...(t.lines || []).map((l) => h("tr", {"data-tenant": t.tenant},
      h("td", null, tenantTag(t.tenant)), h("td", null, l.item), h("td", null, l.model || "-"),
      h("td", null, l.kind || "-"), h("td", null, l.profile || "-"),
      h("td", null, (l.capacity || "-") + (l.offpeak ? ", off-peak" : "")),
      h("td", {class: "price-book"}, l.price_book || "-"),
      h("td", {class: "num"}, fmtQty(l.hours)), h("td", {class: "num"}, fmtRate(l.rate_minor, cur)),
      money(l.amount_minor))),
    h("tr", {class: "subtotal", "data-tenant-total": t.tenant},
      h("td", {colspan: 9}, `${t.tenant} total` + (t.budget_minor !== null && t.budget_minor !== undefined
        ? ` (budget ${fmtMoney(t.budget_minor, cur)}, ${Math.round(t.total_minor / Math.max(1, t.budget_minor) * 100)}% used)` : "")),
      money(t.total_minor)),
  ]);
  const unbilled = inv.unbilled || (inv.idle ? {amount_minor: inv.idle.amount_minor} : null);
  if (unbilled) {
    rows.push(h("tr", {class: "subtotal", id: "unbilled"}, h("td", {colspan: 9}, "unbilled: idle capacity" +
      (unbilled.idle_minor !== undefined ? ` ${fmtMoney(unbilled.idle_minor, cur)}, discounts and premiums ${fmtMoney(unbilled.adjustments_minor, cur)}` : "")),
    money(unbilled.amount_minor)));
  }
  if (inv.cluster) {
    rows.push(h("tr", {class: "total"}, h("td", {colspan: 9}, "cluster" +
      (inv.cluster.gpu_hours !== undefined ? ` (${fmtQty(inv.cluster.gpu_hours)} GPU-hours of capacity at list price)` : "")),
    h("td", {class: "num", id: "cluster-total"}, fmtMoney(inv.cluster.amount_minor, cur))));
  }
  out.push(h("h2", null, `Invoice ${inv.period} `, btn),
    h("p", {class: "note"}, `Price book version ${inv.price_book || "-"} at the start of the month; ` +
      `each line's prices are those of the version in its "Prices of" column; amounts in ${cur}.`),
    table(["Tenant", "Item", "Model", "Kind", "Profile", "Capacity", "Prices of", "Hours", "Rate / h", "Amount"], rows, {id: "invoice"}));
  return out;
}
