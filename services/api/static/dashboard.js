// settleq dashboard: reads the API with a viewer (or operator) bearer token.
// Every value from the API is inserted as text (textContent), never as HTML:
// job ids, partition keys and reasons come from producers.
"use strict";

const TOKEN_KEY = "settleq.token";
const REFRESH_MS = 2000;
// The dispute stats sum every open dispute (a query over the whole queue): read
// them every 10 s, not on every 2-second refresh.
const DISPUTES_REFRESH_MS = 10000;
const JOBS_SHOWN = 15;
const SVG_NS = "http://www.w3.org/2000/svg";

const $ = (id) => document.getElementById(id);
let timer = null;
let disputesReadAt = -Infinity;
let oldestOpenAt = null;

class Unauthorized extends Error {}
class Forbidden extends Error {}

async function api(path) {
  const token = sessionStorage.getItem(TOKEN_KEY);
  const response = await fetch(path, {
    headers: { Authorization: `Bearer ${token}`, Accept: "application/json" },
    cache: "no-store",
  });
  if (response.status === 401) throw new Unauthorized();
  if (response.status === 403) throw new Forbidden();
  if (!response.ok) throw new Error(`${path}: HTTP ${response.status}`);
  return response.json();
}

function el(tag, text, className) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = String(text);
  if (className) node.className = className;
  return node;
}

function row(cells) {
  const tr = document.createElement("tr");
  for (const cell of cells) tr.appendChild(cell);
  return tr;
}

function fill(tbody, rows) {
  tbody.replaceChildren(...rows);
}

function ago(seconds) {
  if (seconds === null || seconds === undefined) return "unknown";
  if (seconds < 1) return "0 s";
  if (seconds < 120) return `${Math.round(seconds)} s`;
  if (seconds < 7200) return `${Math.round(seconds / 60)} min`;
  if (seconds < 172800) return `${(seconds / 3600).toFixed(1)} h`;
  return `${(seconds / 86400).toFixed(1)} days`;
}

// Money arrives as decimal strings and is shown as sent. A total over several
// strings is added exactly, as scaled integers (BigInt), never as floats.
function decimalSum(values) {
  const scale = Math.max(0, ...values.map((v) => (v.split(".")[1] || "").length));
  let total = 0n;
  for (const value of values) {
    const [whole, fraction = ""] = value.replace(/^[-+]/, "").split(".");
    const scaled = BigInt(whole + fraction.padEnd(scale, "0"));
    total += value.startsWith("-") ? -scaled : scaled;
  }
  const digits = (total < 0n ? -total : total).toString().padStart(scale + 1, "0");
  const text = scale ? `${digits.slice(0, -scale)}.${digits.slice(-scale)}` : digits;
  return total < 0n ? `-${text}` : text;
}

function time(iso) {
  return iso ? new Date(iso).toLocaleTimeString() : "";
}

function progressBar(fraction) {
  const outer = el("div", null, "bar");
  const inner = el("div");
  inner.style.width = `${Math.max(0, Math.min(1, fraction)) * 100}%`;
  outer.appendChild(inner);
  outer.title = `${Math.round(fraction * 100)}%`;
  const td = el("td");
  td.appendChild(outer);
  return td;
}

function renderJobs(page) {
  fill(
    $("jobs").tBodies[0],
    page.items.map((job) => {
      const id = el("td");
      id.appendChild(el("code", job.job_id));
      const state = el("td", job.state, `state state-${job.state}`);
      const tr = row([
        id,
        el("td", job.kind),
        state,
        progressBar(job.progress),
        el("td", job.lines, "num"),
        el("td", job.outcomes.posted, "num"),
        el("td", job.outcomes.disputed, "num"),
        el("td", job.outcomes.duplicate, "num"),
        el("td", job.outcomes.dead_lettered, "num"),
        el("td", job.amounts.posted, "num"),
        el("td", job.amounts.disputed, "num"),
        el("td", time(job.created_at)),
      ]);
      tr.dataset.jobId = job.job_id;
      tr.dataset.state = job.state;
      return tr;
    }),
  );
}

function renderOutcomes(summary) {
  for (const name of ["posted", "disputed", "duplicate", "dead_lettered"]) {
    $(`out-${name}`).textContent = summary.outcomes[name].toLocaleString();
  }
  const rates = summary.throughput.lines_per_s;
  // The last bucket is still filling: the one before is the latest full one.
  const now = rates.length > 1 ? rates[rates.length - 2] : rates[0] || 0;
  $("rate-now").textContent = Math.round(now).toLocaleString();
  $("window-note").textContent =
    `Outcomes of the last ${summary.window_s / 60} minutes; updated ${time(summary.generated_at)}.`;
}

function svg(tag, attributes, text) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, value);
  if (text !== undefined) node.textContent = text;
  return node;
}

function renderChart(throughput) {
  const chart = $("chart");
  const values = throughput.lines_per_s;
  // Drawn in the element's own pixels, so text is never stretched.
  const width = Math.max(300, Math.round(chart.getBoundingClientRect().width)) || 800;
  const [height, left, bottom, top] = [200, 56, 22, 10];
  chart.setAttribute("viewBox", `0 0 ${width} ${height}`);
  const max = Math.max(1, ...values);
  const x = (i) => left + (i * (width - left - 8)) / Math.max(1, values.length - 1);
  const y = (v) => height - bottom - (v / max) * (height - bottom - top);
  const points = values.map((v, i) => `${x(i).toFixed(1)},${y(v).toFixed(1)}`);
  const base = height - bottom;
  const minutes = Math.round((values.length * throughput.bucket_s) / 60);
  chart.replaceChildren(
    svg("line", { x1: left, y1: base, x2: width - 8, y2: base, class: "axis" }),
    svg("line", { x1: left, y1: top, x2: left, y2: base, class: "axis" }),
    svg("polygon", {
      points: `${x(0)},${base} ${points.join(" ")} ${x(values.length - 1)},${base}`,
      class: "area",
    }),
    svg("polyline", { points: points.join(" "), class: "line" }),
    svg("text", { x: left - 6, y: top + 10, "text-anchor": "end" }, Math.round(max).toLocaleString()),
    svg("text", { x: left - 6, y: base, "text-anchor": "end" }, "0"),
    svg("text", { x: left, y: height - 4 }, `-${minutes} min`),
    svg("text", { x: width - 8, y: height - 4, "text-anchor": "end" }, "now"),
  );
}

function renderQueues(summary) {
  fill(
    $("queues").tBodies[0],
    summary.queues.map((q) =>
      row([
        el("td", q.delayed ? `${q.queue} (retries)` : q.queue),
        el("td", q.depth.toLocaleString(), "num"),
        el("td", q.depth ? ago(q.oldest_age_s) : "-", "num"),
      ]),
    ),
  );
  $("queues-error").textContent = summary.queues_error
    ? `Queues unreadable: ${summary.queues_error}`
    : "";
}

function renderDeadLetters(summary) {
  const byReason = new Map();
  for (const item of summary.dead_letters) {
    const entry = byReason.get(item.reason) || { dead: 0, requeued: 0, discarded: 0, lines: 0 };
    entry[item.status] = (entry[item.status] || 0) + item.count;
    if (item.status === "dead") entry.lines += item.lines;
    byReason.set(item.reason, entry);
  }
  const rows = [...byReason.entries()].map(([reason, entry]) => {
    const link = el("a", reason);
    link.href = `#dead-letters/${encodeURIComponent(reason)}`;
    const cell = el("td");
    cell.appendChild(link);
    return row([
      cell,
      el("td", entry.dead, "num"),
      el("td", entry.requeued, "num"),
      el("td", entry.discarded, "num"),
      el("td", entry.lines, "num"),
    ]);
  });
  if (!rows.length) rows.push(row([el("td", "none", "muted")]));
  fill($("dead-letters").tBodies[0], rows);
}

// Its age moves on every refresh, between two readings of the stats.
function showOldestDispute() {
  const oldest = oldestOpenAt;
  $("disputes-oldest").textContent = oldest ? ago((Date.now() - Date.parse(oldest)) / 1000) : "-";
  $("disputes-oldest").title = oldest || "none open";
}

function renderDisputes(stats) {
  const open = stats.totals.filter((t) => t.status === "open");
  const sum = (field) => (open.length ? decimalSum(open.map((t) => t[field])) : "0");
  $("disputes-open").textContent = open.reduce((n, t) => n + t.count, 0).toLocaleString();
  $("disputes-claimed").textContent = sum("claimed");
  $("disputes-variance").textContent = sum("variance");
  $("disputes-at-stake").textContent = sum("abs_variance");
  oldestOpenAt = stats.oldest_open_at;
  showOldestDispute();
  const kinds = open.map((t) => {
    const tr = row([
      el("td", t.kind),
      el("td", t.count.toLocaleString(), "num"),
      el("td", t.claimed, "num"),
      el("td", t.model, "num"),
      el("td", t.variance, "num"),
      el("td", t.abs_variance, "num"),
    ]);
    tr.dataset.kind = t.kind;
    return tr;
  });
  if (!kinds.length) kinds.push(row([el("td", "none open", "muted")]));
  fill($("disputes-kinds").tBodies[0], kinds);
  const partitions = stats.top_partitions.map((p) => {
    const tr = row([
      el("td", p.partition_key),
      el("td", p.kind),
      el("td", p.open_count.toLocaleString(), "num"),
      el("td", p.open_variance, "num"),
      el("td", p.open_abs_variance, "num"),
    ]);
    tr.dataset.partition = p.partition_key;
    return tr;
  });
  if (!partitions.length) partitions.push(row([el("td", "none open", "muted")]));
  fill($("disputes-partitions").tBodies[0], partitions);
}

// Its own request: the rest of the board stays live when this one fails.
async function refreshDisputes() {
  if (Date.now() - disputesReadAt < DISPUTES_REFRESH_MS) return;
  disputesReadAt = Date.now();
  try {
    renderDisputes(await api("/v1/disputes/stats"));
    $("disputes-error").textContent = "";
  } catch (error) {
    if (error instanceof Unauthorized) throw error;
    $("disputes-error").textContent = `Disputes unreadable: ${error.message}`;
  }
}

async function showLetters() {
  const match = location.hash.match(/^#dead-letters\/(.+)$/);
  $("letters").hidden = !match;
  if (!match) return;
  const reason = decodeURIComponent(match[1]);
  $("letters-reason").textContent = reason;
  $("letters-error").textContent = "";
  const tbody = $("letters-table").tBodies[0];
  try {
    const query = new URLSearchParams({ reason, status: "dead", limit: "100" });
    const page = await api(`/admin/dead-letters?${query}`);
    fill(
      tbody,
      page.items.map((d) =>
        row([
          el("td", d.id),
          el("td", d.job_id),
          el("td", d.kind),
          el("td", d.partition_key),
          el("td", d.document_id),
          el("td", d.line_ref),
          el("td", d.attempts, "num"),
          el("td", time(d.last_failed_at)),
        ]),
      ),
    );
  } catch (error) {
    fill(tbody, []);
    if (error instanceof Unauthorized) return signOut("The token is no longer valid.");
    $("letters-error").textContent =
      error instanceof Forbidden
        ? "Listing dead letters needs an operator token."
        : `Could not load dead letters: ${error.message}`;
  }
}

async function refresh() {
  clearTimeout(timer);
  try {
    const [summary, jobs] = await Promise.all([
      api("/v1/dashboard/summary"),
      api(`/v1/jobs?limit=${JOBS_SHOWN}`),
      refreshDisputes(),
    ]);
    renderOutcomes(summary);
    renderChart(summary.throughput);
    renderQueues(summary);
    renderDeadLetters(summary);
    renderJobs(jobs);
    showOldestDispute();
    $("status").textContent = `live, refreshed every ${REFRESH_MS / 1000} s`;
  } catch (error) {
    if (error instanceof Unauthorized) return signOut("That token is not valid.");
    $("status").textContent = `refresh failed (${error.message}); retrying`;
  }
  timer = setTimeout(refresh, REFRESH_MS);
}

function signOut(message) {
  clearTimeout(timer);
  disputesReadAt = -Infinity;
  sessionStorage.removeItem(TOKEN_KEY);
  $("board").hidden = true;
  $("sign-out").hidden = true;
  $("sign-in").hidden = false;
  $("sign-in-error").textContent = message || "";
  $("status").textContent = "";
}

function open() {
  $("sign-in").hidden = true;
  $("board").hidden = false;
  $("sign-out").hidden = false;
  refresh();
  showLetters();
}

document.addEventListener("DOMContentLoaded", () => {
  $("sign-in").addEventListener("submit", (event) => {
    event.preventDefault();
    sessionStorage.setItem(TOKEN_KEY, $("token").value.trim());
    $("token").value = "";
    open();
  });
  $("sign-out").addEventListener("click", () => signOut());
  window.addEventListener("hashchange", showLetters);
  if (sessionStorage.getItem(TOKEN_KEY)) open();
  else signOut();
});
