// settleq dashboard: reads the API with a viewer (or operator) bearer token.
// Every value from the API is inserted as text (textContent), never as HTML.
import { Unauthorized, api, forget, setToken, shareTokens, token } from "./api.js";
import { drawThroughput } from "./chart.js";
import { $, cell, el, fill, link, markOverflow, row } from "./dom.js";
import { NOT_TOTALS, ago, count, decimalSum, money, moneyOfKinds, rate, setKinds, when } from "./format.js";
import { jobIdInHash, jobLink, jobState, showJob, wireJobPage } from "./job.js";
import { reasonInHash, showLetters, wireLetters } from "./letters.js";
import { documentInHash, identityInHash, showDocument, showIdentity, wireSearch } from "./history.js";
import { disputesInHash, showDisputes, wireDisputes } from "./disputes.js";
import { deductionsInHash, remittanceInHash, showDeductions, showRemittance, wireDeductions } from "./deductions.js";
import { partnerInHash, partnersInHash, showPartner, showPartners } from "./partners.js";
import { forgetPeriods, refreshPeriods, showPeriods, wirePeriods } from "./periods.js";
import { contractInHash, contractsInHash, forgetContracts, showContract, showContracts, wireContracts } from "./contracts.js";

const REFRESH_MS = 2000;
// The dispute stats sum every open dispute (a query over the whole queue): read
// them every 10 s, not on every 2-second refresh.
const DISPUTES_REFRESH_MS = 10000;
const JOBS_SHOWN = 15;
const RANGE_KEY = "settleq.range";
const RANGE_LABELS = { "10m": "10 minutes", "1h": "hour", "24h": "24 hours" };

let timer = null;
let disputesReadAt = -Infinity;
let oldestOpenAt = null;

const range = () => sessionStorage.getItem(RANGE_KEY) || "10m";

function progressBar(fraction) {
  const outer = el("div", null, "bar");
  const inner = el("div");
  inner.style.width = `${Math.max(0, Math.min(1, fraction)) * 100}%`;
  outer.appendChild(inner);
  outer.title = `${Math.round(fraction * 100)}%`;
  return cell(outer);
}

function renderJobs(page) {
  fill(
    $("jobs").tBodies[0],
    page.items.map((job) => {
      const tr = row([
        jobLink(job.job_id),
        el("td", job.kind),
        el("td", jobState(job).text, `state ${jobState(job).className}`),
        progressBar(job.progress),
        el("td", count(job.lines), "num"),
        el("td", count(job.outcomes.posted), "num"),
        el("td", count(job.outcomes.disputed), "num"),
        el("td", count(job.outcomes.duplicate), "num"),
        el("td", count(job.outcomes.dead_lettered), "num"),
        el("td", money(job.amounts.posted, job.kind), "num"),
        el("td", money(job.amounts.disputed, job.kind), "num"),
        el("td", when(job.created_at)),
      ]);
      tr.dataset.jobId = job.job_id;
      tr.dataset.state = job.state;
      return tr;
    }),
  );
  markJobsOverflow();
}

const markJobsOverflow = () => markOverflow($("jobs").parentElement, $("jobs-scroll-hint"));

function renderOutcomes(summary) {
  for (const name of ["posted", "disputed", "duplicate", "dead_lettered"]) {
    $(`out-${name}`).textContent = count(summary.outcomes[name]);
  }
  $("rate-now").textContent = rate(summary.rate_now);
  $("rate-now").title = `the chart's latest full ${summary.throughput.bucket_s}-second bucket`;
  $("window-note").textContent =
    `Outcomes of the last ${RANGE_LABELS[summary.range]}; updated ${when(summary.generated_at)}.`;
}

// Finance's view: the money settled in the range, each kind at its quantum. A
// kind whose amounts are unit costs (recipes) is named apart: no money total.
function renderMoney(summary) {
  const apart = summary.money.filter((m) => NOT_TOTALS.has(m.kind)).map((m) => m.kind);
  $("money-apart").textContent = apart.length
    ? `Also settled: ${apart.join(", ")} (unit costs, not money totals: not added up here).`
    : "";
  const cards = summary.money.filter((m) => !NOT_TOTALS.has(m.kind)).flatMap((m) =>
    [
      ["posted", m.posted],
      ["disputed (claimed)", m.disputed],
    ].map(([label, amount]) => {
      const card = el("div", null, "card");
      card.append(el("span", `${m.kind}: ${label}`, "label"), el("span", money(amount, m.kind), "value"));
      card.dataset.kind = m.kind;
      card.dataset.money = label.split(" ")[0];
      return card;
    }),
  );
  if (!cards.length) cards.push(el("p", apart.length ? "No money totals in the range." : "Nothing settled in the range.", "muted"));
  $("money-cards").replaceChildren(...cards);
}

const opsInHash = () => location.hash === "#operations";

function showView() {
  const ops = opsInHash();
  $("finance-view").hidden = ops;
  $("ops-view").hidden = !ops;
  $("view-finance").classList.toggle("active", !ops);
  $("view-ops").classList.toggle("active", ops);
  markJobsOverflow();
}

function renderRelay(summary) {
  const { backlog, lag_s: lag } = summary.relay;
  $("relay-backlog").textContent = count(backlog);
  $("relay-lag").textContent = lag === null ? "none waiting" : ago(lag);
}

function renderProcesses(summary) {
  const rows = (summary.processes || []).map((process) => {
    const tr = row([
      el("td", process.component),
      el("td", count(process.restarts), "num"),
      el("td", process.crash_looping ? "crash-looping" : "running", process.crash_looping ? "error" : ""),
    ]);
    tr.dataset.component = process.component;
    return tr;
  });
  if (!rows.length) rows.push(row([el("td", "no supervisor reporting (settleq up writes its counts)", "muted")]));
  fill($("processes").tBodies[0], rows);
}

function renderQueues(summary) {
  fill(
    $("queues").tBodies[0],
    summary.queues.map((q) =>
      row([
        el("td", q.delayed ? `${q.queue} (retries)` : q.queue),
        el("td", count(q.depth), "num"),
        el("td", q.depth ? ago(q.oldest_age_s) : "-", "num"),
      ]),
    ),
  );
  $("queues-error").textContent = summary.queues_error ? `Queues unreadable: ${summary.queues_error}` : "";
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
    const tr = row([
      cell(link(reason, `#dead-letters/${encodeURIComponent(reason)}`)),
      el("td", count(entry.dead), "num"),
      el("td", count(entry.requeued), "num"),
      el("td", count(entry.discarded), "num"),
      el("td", count(entry.lines), "num"),
    ]);
    tr.dataset.reason = reason;
    return tr;
  });
  if (!rows.length) rows.push(row([el("td", "none", "muted")]));
  fill($("dead-letters").tBodies[0], rows);
}

// Its age moves on every refresh, between two readings of the stats.
function showOldestDispute() {
  const oldest = oldestOpenAt;
  $("disputes-oldest").textContent = oldest ? ago((Date.now() - Date.parse(oldest)) / 1000) : "-";
  $("disputes-oldest").title = oldest ? when(oldest) : "none open";
}

function renderDisputes(stats) {
  const open = stats.totals.filter((t) => t.status === "open");
  const kinds = new Set(open.map((t) => t.kind));
  // One kind: at its quantum; several: every digit sent, grouped alike.
  const shown = (value) => moneyOfKinds(value, kinds);
  const sum = (field) => shown(open.length ? decimalSum(open.map((t) => t[field])) : "0");
  $("disputes-open").textContent = count(open.reduce((n, t) => n + t.count, 0));
  $("disputes-claimed").textContent = sum("claimed");
  $("disputes-variance").textContent = sum("variance");
  $("disputes-at-stake").textContent = sum("abs_variance");
  oldestOpenAt = stats.oldest_open_at;
  showOldestDispute();
  const byKind = open.map((t) => {
    const tr = row([
      el("td", t.kind),
      el("td", count(t.count), "num"),
      ...[t.claimed, t.model, t.variance, t.abs_variance].map((v) => el("td", money(v, t.kind), "num")),
    ]);
    tr.dataset.kind = t.kind;
    return tr;
  });
  if (!byKind.length) byKind.push(row([el("td", "none open", "muted")]));
  fill($("disputes-kinds").tBodies[0], byKind);
  const partitions = stats.top_partitions.map((p) => {
    const tr = row([
      el("td", p.partition_key),
      el("td", p.kind),
      el("td", count(p.open_count), "num"),
      el("td", money(p.open_variance, p.kind), "num"),
      el("td", money(p.open_abs_variance, p.kind), "num"),
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

async function refresh() {
  clearTimeout(timer);
  try {
    const [summary, jobs] = await Promise.all([
      api(`/v1/dashboard/summary?range=${range()}`),
      api(`/v1/jobs?limit=${JOBS_SHOWN}`),
      refreshDisputes(),
      refreshPeriods(),
    ]);
    renderOutcomes(summary);
    renderMoney(summary);
    drawThroughput($("chart"), summary.throughput, summary.window_s);
    renderRelay(summary);
    renderQueues(summary);
    renderProcesses(summary);
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

// ``everywhere``: the user signed out (every tab forgets); not when this tab
// merely has no token yet, or was told by another.
function signOut(message, everywhere = true) {
  clearTimeout(timer);
  disputesReadAt = -Infinity;
  forgetPeriods();
  forgetContracts();
  if (everywhere) forget();
  $("board").hidden = true;
  $("sign-out").hidden = true;
  $("search").hidden = true;
  $("sign-in").hidden = false;
  $("sign-in-error").textContent = message || "";
  $("status").textContent = "";
}

// The views a link opens: a malformed link hides them all and says so.
const VIEWS = [
  "overview",
  "job",
  "letters",
  "document",
  "identity",
  "disputes-page",
  "partners-page",
  "partner-page",
  "deductions-page",
  "remittance-page",
  "contracts-page",
  "contract-page",
];

// A hash that does not decode (`#document/%E0%A4%A`): each view's own reading of
// it would throw a URIError, leaving the previous view on screen.
function malformedLink() {
  try {
    decodeURIComponent(location.hash);
    return false;
  } catch {
    return true;
  }
}

function route() {
  const malformed = malformedLink();
  $("not-found").hidden = !malformed;
  if (malformed) {
    for (const id of VIEWS) $(id).hidden = true;
    $("not-found-link").textContent = location.hash;
    return;
  }
  $("overview").hidden = Boolean(
    jobIdInHash() ||
      reasonInHash() ||
      documentInHash() ||
      identityInHash() ||
      disputesInHash() ||
      partnersInHash() ||
      partnerInHash() ||
      deductionsInHash() ||
      remittanceInHash() ||
      contractsInHash() ||
      contractInHash(),
  );
  showView();
  showJob();
  showLetters();
  showDocument();
  showIdentity();
  showDisputes();
  showPartners();
  showPartner();
  showDeductions();
  showRemittance();
  showContracts();
  showContract();
  showPeriods();
}

async function open() {
  $("sign-in").hidden = true;
  $("board").hidden = false;
  $("sign-out").hidden = false;
  $("search").hidden = false;
  $("range").value = range();
  // The kinds' places first, so that no amount is drawn before its quantum is known.
  try {
    setKinds(await api("/v1/kinds"));
  } catch (error) {
    if (error instanceof Unauthorized) return signOut("That token is not valid.");
  }
  refresh();
  route();
}

function start() {
  $("sign-in").addEventListener("submit", (event) => {
    event.preventDefault();
    setToken($("token").value.trim(), $("remember").checked);
    $("token").value = "";
    open();
  });
  $("sign-out").addEventListener("click", () => signOut());
  $("range").addEventListener("change", () => {
    sessionStorage.setItem(RANGE_KEY, $("range").value);
    refresh();
  });
  wireJobPage();
  wireLetters(signOut);
  wireSearch();
  wireDisputes();
  wireDeductions();
  wirePeriods();
  wireContracts(signOut);
  window.addEventListener("hashchange", route);
  window.addEventListener("resize", markJobsOverflow);
  shareTokens(open, () => signOut("Signed out in another tab.", false));
  if (token()) open();
  else signOut(undefined, false);
}

if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
else start();
