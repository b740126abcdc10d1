// Small helpers shared by the pages: a DOM builder (text is always set as
// text, never parsed as HTML), number, time and money formatting, and the
// colour of a tenant (the same on every page and every reload).

/**
 * h("td", {class: "x", onclick: fn}, child, ...) -> HTMLElement.
 * Children: strings/numbers (text nodes), elements, arrays, null (skipped).
 */
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on") && typeof v === "function") el.addEventListener(k.slice(2), v);
    else if (k === "style" && typeof v === "object") Object.assign(el.style, v);
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

const SVG = "http://www.w3.org/2000/svg";

/** The same as h() for SVG elements. */
export function s(tag, attrs, ...children) {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v !== null && v !== undefined) el.setAttribute(k, String(v));
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

/** A table from column titles and rows of cells (cells as for h()). */
/** A table in a box that scrolls sideways when it is wider than the page. */
export function table(cols, rows, attrs) {
  return h("div", {class: "table-wrap"}, h("table", attrs || {},
    h("thead", null, h("tr", null, cols.map((c) => h("th", null, c)))),
    h("tbody", null, rows.length ? rows : h("tr", null, h("td", {colspan: cols.length, class: "empty"}, "none")))));
}

export function fmtNum(x, digits = 1) {
  if (x === null || x === undefined || Number.isNaN(x)) return "-";
  return Number.isInteger(x) ? String(x) : x.toFixed(digits);
}

/** A measured quantity: 0, two significant digits when small, else 3 or 1 decimals. */
export function fmtQty(x) {
  if (x === null || x === undefined || Number.isNaN(x)) return "-";
  const a = Math.abs(x);
  if (a === 0) return "0";
  if (a < 0.01) return x.toPrecision(2);
  return x.toFixed(a < 10 ? 3 : a < 1000 ? 1 : 0);
}

/** Seconds as "45s", "12m", "3h 05m", "2d 4h". */
export function fmtDuration(sec) {
  if (sec === null || sec === undefined || sec < 0) return "-";
  sec = Math.round(sec);
  if (sec < 60) return sec + "s";
  if (sec < 3600) return Math.floor(sec / 60) + "m";
  if (sec < 86400) return Math.floor(sec / 3600) + "h " + String(Math.floor(sec % 3600 / 60)).padStart(2, "0") + "m";
  return Math.floor(sec / 86400) + "d " + Math.floor(sec % 86400 / 3600) + "h";
}

/** Unix seconds as local "YYYY-MM-DD HH:MM:SS" ("-" for 0). */
export function fmtTime(t) {
  if (!t) return "-";
  const d = new Date(t * 1000);
  const p = (n) => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}

/** Integer minor units (cents) as "1,234.56 EUR"; money is never a float on the wire. */
export function fmtMoney(minor, currency) {
  if (minor === null || minor === undefined) return "-";
  const neg = minor < 0;
  const abs = Math.abs(Math.trunc(minor));
  const units = Math.floor(abs / 100).toLocaleString("en-US");
  const cents = String(abs % 100).padStart(2, "0");
  return (neg ? "-" : "") + units + "." + cents + (currency ? " " + currency : "");
}

/** A rate in minor units per hour, which may be a fraction of a minor unit
 * (a discounted memory rate of 0.8 cents): two decimals of the currency, or
 * as many as it takes (up to six) to show it, never rounded to nothing. */
export function fmtRate(minor, currency) {
  if (minor === null || minor === undefined) return "-";
  const v = minor / 100;
  let s = v.toFixed(2);
  // within a billionth: 0.7 / 100 (0.00699999...) is 0.007
  for (let d = 3; d <= 6 && Math.abs(Number(s) - v) > 1e-9; d++) s = v.toFixed(d);
  const [units, frac] = s.replace("-", "").split(".");
  return (v < 0 ? "-" : "") + Number(units).toLocaleString("en-US") + "." + frac +
    (currency ? " " + currency : "");
}

/** The current month as "YYYY-MM" (UTC, as allotd's invoices and usage days). */
export function thisMonth() {
  const d = new Date();
  return d.getUTCFullYear() + "-" + String(d.getUTCMonth() + 1).padStart(2, "0");
}

let skewMs = 0;

/** allotd's clock minus ours (from its replies' Date header, whole seconds). */
export function setServerSkew(ms) {
  skewMs = Math.abs(ms) < 2000 ? 0 : ms; // the header has whole seconds: ignore less
}

/** Now, in allotd's unix seconds: waits and ages are computed on its clock. */
export function nowSec() {
  return Math.floor((Date.now() + skewMs) / 1000);
}

/** A stable colour per tenant path: a hue from a string hash. */
export function tenantColor(path) {
  let x = 2166136261;
  for (let i = 0; i < path.length; i++) x = Math.imul(x ^ path.charCodeAt(i), 16777619);
  const hue = (x >>> 0) % 360;
  return `hsl(${hue} 62% 52%)`;
}

/** The text colour that reads best on tenantColor(path): white, or black
 * on the light hues (yellows, greens), whichever contrasts more (WCAG
 * relative luminance; at least 4.6:1 on every hue). */
export function tenantInk(path) {
  const hue = Number(/hsl\((\d+)/.exec(tenantColor(path))[1]);
  const s = 0.62, l = 0.52, a = s * Math.min(l, 1 - l);
  const f = (n) => {
    const k = (n + hue / 30) % 12;
    const c = l - a * Math.max(-1, Math.min(k - 3, 9 - k, 1));
    return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4;
  };
  const lum = 0.2126 * f(0) + 0.7152 * f(8) + 0.0722 * f(4);
  // black, not near black: at the hues where white and black contrast
  // about equally, only pure black still gives 4.5:1
  return 1.05 / (lum + 0.05) >= (lum + 0.05) / 0.05 ? "#fff" : "#000";
}

/** A coloured dot and the tenant's name. */
export function tenantTag(path) {
  return h("span", {class: "tenant", "data-tenant": path},
    h("span", {class: "dot", style: {background: tenantColor(path)}}), path);
}

/** GPUs a job's task holds: whole GPUs count 1 each, a MIG slice or fraction its share. */
export function taskGpus(t) {
  const n = (t.gpus || []).length;
  if (t.mig_profile) return (t.gpu_milli || 0) / 1000;
  if (t.gpu_milli && t.gpu_milli < 1000) return n * t.gpu_milli / 1000;
  return n;
}

export function jobGpus(j) {
  return ((j.placement && j.placement.tasks) || []).reduce((a, t) => a + taskGpus(t), 0);
}

export const LIVE = ["pending", "starting", "running"];
