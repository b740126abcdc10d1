// Charts drawn as inline SVG (no library): a horizontal stacked bar and a
// stacked column chart over time. Each part carries a <title> tooltip.

import {h, s, fmtNum, fmtQty} from "./util.js";

/**
 * One horizontal bar split into parts [{label, value, color}], with a legend.
 */
export function stackedBar(parts, {width = 600, height = 26, unit = ""} = {}) {
  const total = parts.reduce((a, p) => a + p.value, 0) || 1;
  let x = 0;
  const svg = s("svg", {class: "chart bar", viewBox: `0 0 ${width} ${height}`, width: "100%",
    height, preserveAspectRatio: "none", role: "img",
    "aria-label": parts.map((p) => `${p.label} ${fmtNum(p.value, 2)}${unit}`).join(", ")});
  for (const p of parts) {
    const w = p.value / total * width;
    if (w > 0) {
      svg.append(s("rect", {x, y: 0, width: w, height, fill: p.color, "data-part": p.label},
        s("title", null, `${p.label}: ${fmtNum(p.value, 2)}${unit}`)));
    }
    x += w;
  }
  return h("figure", {class: "stacked"}, svg, legend(parts.map((p) =>
    ({label: `${p.label} ${fmtNum(p.value, 2)}${unit}`, color: p.color}))));
}

export function legend(items) {
  return h("div", {class: "legend"}, items.map((i) =>
    h("span", {class: "item"}, h("span", {class: "swatch", style: {background: i.color}}), i.label)));
}

/**
 * Columns over time: keys (x labels, in order), series [{name, color,
 * values: Map key -> number}], stacked. Returns a figure with axis, legend.
 */
export function stackedColumns(keys, series, {height = 220, unit = "", title = ""} = {}) {
  const pad = {l: 48, r: 8, t: 10, b: 38};
  const colW = Math.max(6, Math.min(40, Math.floor(760 / Math.max(1, keys.length))));
  const width = pad.l + pad.r + colW * keys.length;
  const sums = keys.map((k) => series.reduce((a, se) => a + (se.values.get(k) || 0), 0));
  const max = niceMax(Math.max(0, ...sums));
  const ih = height - pad.t - pad.b;
  const y = (v) => pad.t + ih - v / max * ih;
  const svg = s("svg", {class: "chart col-chart", viewBox: `0 0 ${width} ${height}`, width,
    height, role: "img", "aria-label": title});
  for (let i = 0; i <= 4; i++) { // grid and y labels
    const v = max * i / 4;
    svg.append(s("line", {x1: pad.l, x2: width - pad.r, y1: y(v), y2: y(v), class: "grid"}),
      s("text", {x: pad.l - 4, y: y(v) + 4, "text-anchor": "end", class: "axis"}, axisLabel(v, max)));
  }
  const every = Math.max(1, Math.ceil(keys.length / 12));
  keys.forEach((k, i) => {
    const x = pad.l + i * colW;
    let acc = 0;
    for (const se of series) {
      const v = se.values.get(k) || 0;
      if (v <= 0) continue;
      svg.append(s("rect", {x: x + 1, width: colW - 2, y: y(acc + v), height: y(acc) - y(acc + v),
        fill: se.color, "data-series": se.name, "data-key": k},
      s("title", null, `${se.name} ${k}: ${fmtQty(v)}${unit}`)));
      acc += v;
    }
    if (i % every === 0) {
      svg.append(s("text", {x: x + colW / 2, y: height - pad.b + 14, "text-anchor": "middle",
        class: "axis"}, k.length > 10 ? k.slice(5) : k.slice(-5)));
    }
  });
  return h("figure", {class: "columns"}, title ? h("figcaption", null, title) : null,
    h("div", {class: "scroll"}, svg),
    legend(series.map((se) => ({label: se.name, color: se.color}))));
}

/** A y-axis label with as many decimals as the axis' step needs. */
function axisLabel(v, max) {
  const digits = Math.max(0, Math.ceil(-Math.log10(max / 4)) + 1);
  return v === 0 ? "0" : v.toFixed(Math.min(digits, 6));
}

function niceMax(v) {
  if (v <= 0) return 1;
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 2, 4, 6, 8, 10]) if (m * p >= v) return m * p;
  return 10 * p;
}
