// The dashboard's only way to allotd: every call carries the signed-in
// token as `Authorization: Bearer` (kept in this tab's sessionStorage).
// Failed calls throw ApiError with the HTTP status and allotd's message.

import {setServerSkew} from "./util.js";

const KEY = "allot.token";

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message || `HTTP ${status}`);
    this.status = status;
    this.code = code;
  }
}

export function token() {
  return sessionStorage.getItem(KEY) || "";
}

/** What the pages learnt about the signed-in token; forgotten with it. */
export const session = {mayCancel: true, scope: ""}; // scope: the token's tenant ("" = all)

export function setToken(t) {
  if (t) sessionStorage.setItem(KEY, t);
  else sessionStorage.removeItem(KEY);
  session.mayCancel = true;
  session.scope = "";
  book = undefined;
}

async function call(method, path, as, body) {
  const headers = {Authorization: "Bearer " + token()};
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const r = await fetch(path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    cache: "no-store",
  });
  const date = Date.parse(r.headers.get("Date") || "");
  if (!Number.isNaN(date)) setServerSkew(date - Date.now());
  if (!r.ok) {
    let code = "", msg = `${r.status} ${r.statusText}`;
    try {
      const b = await r.json();
      if (b && b.error) ({code, message: msg} = b.error);
    } catch (e) { /* not JSON: keep the status line */ }
    throw new ApiError(r.status, code, msg);
  }
  if (as === "text") return r.text();
  if (as === "blob") return r.blob();
  return r.json();
}

export const get = (path) => call("GET", path);
export const getText = (path) => call("GET", path, "text");
export const getBlob = (path) => call("GET", path, "blob");
export const post = (path, body) => call("POST", path, "json", body);

/**
 * Every job the caller may see that matches query ("&state=pending",
 * "&tenant=T&subtree=1"), in submission order, walking the pages; at most
 * `max` jobs (the result's `truncated` is then true).
 */
export async function allJobs(query = "", max = 20000) {
  const out = [];
  let cursor = 0;
  while (out.length < max) {
    const b = await get(`/v1/jobs?limit=1000${query}${cursor ? "&cursor=" + cursor : ""}`);
    out.push(...b.jobs);
    cursor = b.next_cursor;
    if (!cursor) return out;
  }
  out.truncated = true;
  return out;
}

/**
 * The newest jobs that match query, at most `max`, in submission order
 * (as allJobs): a history of any length costs one page (`truncated` is
 * true when older ones were left out).
 */
export async function newestJobs(query = "", max = 1000) {
  const out = [];
  let cursor = 0;
  while (out.length < max) {
    const b = await get(`/v1/jobs?order=newest&limit=${Math.min(1000, max - out.length)}${query}` +
      (cursor ? "&cursor=" + cursor : ""));
    out.push(...b.jobs);
    cursor = b.next_cursor;
    if (!cursor) return out.reverse();
  }
  out.reverse();
  out.truncated = true;
  return out;
}

/** The live jobs (pending, starting, running) matching query: what the cluster holds now. */
export async function liveJobs(query = "") {
  const parts = await Promise.all(["pending", "starting", "running"].map((st) =>
    allJobs(`&state=${st}${query}`)));
  return parts.flat().sort((a, b) => a.id - b.id);
}

let book;   // undefined: not asked yet; null: none is set

/**
 * The price book (GET /v1/pricebook), or null when none is set; asked once
 * per page load. Invoices need one (allotd answers 409 without), so the
 * pages ask for invoices only when this is not null.
 */
export async function priceBook() {
  if (book !== undefined) return book;
  try {
    book = await get("/v1/pricebook");
  } catch (e) {
    if (!(e instanceof ApiError && e.status === 404)) throw e;
    book = null;
  }
  return book;
}
