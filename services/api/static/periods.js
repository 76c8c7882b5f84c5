// Finance's report (#periods, #balances): the open booking period and the last
// closed one (GET /v1/periods), and the balances per kind and partition of a
// chosen period (GET /v1/balances). Each amount is at its kind's quantum; a kind
// whose amounts are unit costs (recipes) is labelled so and never added up with
// money. With an operator token, a "Close period" button opens a confirmation
// stating the period's totals, the disputes it carries over and the dead
// letters waiting, then POST /admin/periods/close.
import { Forbidden, Unauthorized, api, download, mayOperate } from "./api.js";
import { $, cell, el, fill, markOverflow, row } from "./dom.js";
import { NOT_TOTALS, QUANTUM_PLACES, count, decimalSum, money, when } from "./format.js";

// The periods change at a close, their rows as settlement books: read them every
// 10 s, not on every 2-second refresh of the board.
const REFRESH_MS = 10000;
// A period may have a balance for every partition: the table draws this many
// of those matching the filters, and says how many it left out.
const ROWS_SHOWN = 500;
const ACTIVITY = ["opening", "posted", "disputed", "repriced", "resolved", "closing"];

let periods = [];
let loaded = { period: null, kind: null, items: [] };
let readAt = -Infinity;
let reading = null;
let operator = false;

const isOpen = (p) => p.status === "open";
const openPeriod = () => periods.find(isOpen);
// What "Close period" closes: the oldest ended (dated) period, which the close
// makes final; else the open period if it is manual (a dated one ends by itself).
const ended = (p) => p.status === "ended";
const closable = () => periods.filter(ended).at(-1) || periods.find((p) => isOpen(p) && !p.ends_at);
const heading = (p) => (isOpen(p) ? "Open" : ended(p) ? "Ended, to close" : "Last closed");
const unitCosts = (kind) => NOT_TOTALS.has(kind);
const kindLabel = (kind) => (unitCosts(kind) ? `${kind} (unit costs, not money)` : kind);
const visible = () => !$("overview").hidden && !$("finance-view").hidden;
const negative = (value) => String(value).trim().startsWith("-");
const zero = (value) => /^[-+]?0*\.?0*$/.test(String(value).trim());

function say(text, isError = false) {
  $("periods-error").textContent = isError ? text : "";
  $("periods-done").textContent = isError ? "" : text;
}

// Who owes a balance, as GET /v1/partitions/{p}/statement words it: a positive
// closing balance is owed in the kind's direction; a recipe's is a cost.
function owed(item) {
  if (!item.direction) return "unit cost";
  if (zero(item.closing)) return "nothing owed";
  return (item.direction === "owed_to_us") !== negative(item.closing) ? "owes us" : "we owe";
}

// The sum of ``delta`` per kind, outcome and currency: each on its own, never
// added across kinds or currencies; a recipe's labelled as its unit costs.
function totalsTable(totals, caption) {
  const table = el("table", null, "totals");
  table.append(el("caption", caption, "muted"));
  const head = table.createTHead().insertRow();
  for (const [text, className] of [["kind"], ["outcome"], ["rows", "num"], ["sum of delta", "num"], ["currency"]]) {
    head.appendChild(el("th", text, className));
  }
  const body = table.createTBody();
  for (const t of totals) {
    const tr = row([
      el("td", kindLabel(t.kind)),
      el("td", t.outcome),
      el("td", count(t.rows), "num"),
      el("td", money(t.delta, t.kind), "num"),
      el("td", t.currency || ""),
    ]);
    tr.dataset.kind = t.kind;
    tr.dataset.outcome = t.outcome;
    if (unitCosts(t.kind)) tr.classList.add("unit-costs");
    body.appendChild(tr);
  }
  if (!totals.length) body.appendChild(row([el("td", "no rows booked", "muted")]));
  return table;
}

function fact(list, label, value) {
  if (value === null || value === undefined || value === "") return;
  list.append(el("dt", label), value instanceof Node ? value : el("dd", value));
}

const lines = (n) => `${count(n)} line${n === 1 ? "" : "s"}`;

function carriedText(carried) {
  const disputes = carried.disputes.map((d) => `${d.kind}: ${count(d.count)} open, variance ${inCurrency(d)}${money(d.variance, d.kind)}`);
  const letters = carried.dead_letters.map((d) => `${d.kind}: ${count(d.count)} (${lines(d.lines)})`);
  return {
    disputes: disputes.length ? disputes.join("; ") : "none open",
    letters: letters.length ? letters.join("; ") : "none waiting",
  };
}

function periodCard(p) {
  const card = el("article", null, `period status-${p.status}`);
  card.dataset.period = p.name;
  card.dataset.status = p.status;
  card.append(el("h3", `${heading(p)}: ${p.name}`));
  const facts = el("dl", null, "facts");
  fact(facts, "opened", when(p.opened_at));
  fact(facts, "ends", when(p.ends_at));
  fact(facts, "ended", when(p.ended_at));
  fact(facts, "closed", when(p.closed_at));
  fact(facts, "closed by", p.closed_by);
  fact(facts, "opened next", p.next);
  fact(facts, "note", p.note);
  fact(facts, "rows", count(p.rows));
  if (p.carried) {
    const carried = carriedText(p.carried);
    fact(facts, "disputes carried over", carried.disputes);
    fact(facts, "dead letters waiting at the close", carried.letters);
  }
  if (p.journal_sha256) {
    const dd = el("dd");
    dd.appendChild(el("code", p.journal_sha256, "sha256"));
    fact(facts, "journal SHA-256", dd);
  }
  card.append(facts, totalsTable(p.totals, isOpen(p) ? "Booked so far, by kind and outcome" : "Booked, by kind and outcome"));
  if (!isOpen(p)) {
    const button = el("button", "Download journal CSV", "journal");
    button.type = "button";
    button.addEventListener("click", () =>
      download(`/v1/periods/${encodeURIComponent(p.name)}/journal?format=csv`, `journal-${p.name}.csv`).catch((error) =>
        say(`Journal not downloaded: ${error.message}`, true),
      ),
    );
    card.appendChild(button);
  }
  return card;
}

function renderPeriods() {
  const open = openPeriod();
  const closed = periods.find((p) => !isOpen(p));
  const target = closable();
  $("period-open").replaceChildren(open ? periodCard(open) : el("p", "No open period.", "muted"));
  $("period-closed").replaceChildren(closed ? periodCard(closed) : el("p", "No period closed yet.", "muted"));
  $("close-period").hidden = !operator || !target;
  if (target) $("close-period").textContent = `Close period ${target.name}…`;
  const select = $("bal-period");
  const chosen = select.value;
  select.replaceChildren(
    ...periods.map((p) => {
      const option = el("option", `${p.name} (${p.status})`);
      option.value = p.name;
      return option;
    }),
  );
  if (periods.some((p) => p.name === chosen)) select.value = chosen;
}

function fillKinds() {
  const select = $("bal-kind");
  if (select.options.length > 1) return;
  for (const kind of Object.keys(QUANTUM_PLACES).sort()) {
    const option = el("option", kind);
    option.value = kind;
    select.appendChild(option);
  }
}

function balanceRow(b) {
  const tr = row([
    el("td", kindLabel(b.kind)),
    el("td", b.partition_key),
    el("td", owed(b)),
    ...ACTIVITY.map((name) => el("td", money(b[name], b.kind), `num ${name}`)),
    el("td", count(b.in_dispute.count), "num in-dispute"),
    el("td", money(b.in_dispute.variance, b.kind), "num variance"),
    el("td", b.currency, "currency"),
  ]);
  tr.dataset.kind = b.kind;
  tr.dataset.partition = b.partition_key;
  if (unitCosts(b.kind)) tr.classList.add("unit-costs");
  return tr;
}

// ``EUR `` before an amount in its currency: two currencies are never added.
function inCurrency(item) {
  return item.currency ? `${item.currency} ` : "";
}

// Per money kind and currency, its balances added up across the matching
// partitions; a kind of unit costs gets no total (a sum of costs is no amount
// owed), and two currencies are never added.
function totalRows(items) {
  const groups = [...new Set(items.map((b) => `${b.kind}\u0000${b.currency}`))].sort();
  return groups
    .map((group) => group.split("\u0000"))
    .filter(([kind]) => !unitCosts(kind))
    .map(([kind, currency]) => {
      const mine = items.filter((b) => b.kind === kind && b.currency === currency);
      const tr = row([
        el("td", kind),
        el("td", `total of ${count(mine.length)} partition${mine.length === 1 ? "" : "s"}`),
        el("td", ""),
        ...ACTIVITY.map((name) => el("td", money(decimalSum(mine.map((b) => b[name])), kind), `num ${name}`)),
        el("td", count(mine.reduce((n, b) => n + b.in_dispute.count, 0)), "num in-dispute"),
        el("td", money(decimalSum(mine.map((b) => b.in_dispute.variance)), kind), "num variance"),
        el("td", currency, "currency"),
      ]);
      tr.dataset.kind = kind;
      return tr;
    });
}

function renderBalances() {
  const text = $("bal-partition").value.trim().toLowerCase();
  const matching = loaded.items.filter((b) => !text || b.partition_key.toLowerCase().includes(text));
  const rows = matching.slice(0, ROWS_SHOWN).map(balanceRow);
  if (!rows.length) rows.push(row([el("td", loaded.items.length ? "no partition matches" : "no balance in this period", "muted")]));
  const table = $("balances-table");
  fill(table.tBodies[0], rows);
  fill(table.tFoot, totalRows(matching));
  const period = periods.find((p) => p.name === loaded.period);
  const state =
    period && isOpen(period)
      ? "open: its balances still move"
      : period && ended(period)
        ? "ended: its balances no longer move, and are final once it is closed"
        : "closed: its balances are final";
  const cut = matching.length > ROWS_SHOWN ? ` Showing ${count(ROWS_SHOWN)} of ${count(matching.length)}: narrow the filter.` : "";
  $("balances-note").textContent = loaded.period ? `Period ${loaded.period}, ${state}.${cut}` : "";
  const costs = [...new Set(matching.map((b) => b.kind))].filter(unitCosts);
  $("balances-apart").textContent = costs.length
    ? `${costs.join(", ")}: unit costs per partition, shown as costs; not added up, and no money total.`
    : "";
  markBalancesOverflow();
}

// Narrower than its eleven columns, the table scrolls in its box; a scrollbar
// may be an overlay, hidden until touched: the box and a hint say so.
const markBalancesOverflow = () => markOverflow($("balances-table").parentElement, $("balances-scroll-hint"));

async function loadBalances() {
  const period = $("bal-period").value;
  const kind = $("bal-kind").value;
  if (!period) return;
  const query = new URLSearchParams({ period });
  if (kind) query.set("kind", kind);
  const page = await api(`/v1/balances?${query}`);
  // A slower answer for an earlier choice never replaces the one now chosen.
  if (period !== $("bal-period").value || kind !== $("bal-kind").value) return;
  loaded = { period: page.period, kind, items: page.items };
  $("balances-error").textContent = "";
  renderBalances();
}

const showBalances = () =>
  loadBalances().catch((error) => {
    if (error instanceof Unauthorized) throw error;
    $("balances-error").textContent = `Balances unreadable: ${error.message}`;
  });

async function read() {
  periods = (await api("/v1/periods")).items;
  renderPeriods();
  const chosen = periods.find((p) => p.name === $("bal-period").value);
  // A closed period's balances never change: read once; the open one's move.
  if (!chosen || isOpen(chosen) || loaded.period !== chosen.name) await showBalances();
  $("periods-error").textContent = "";
}

// On the board's refresh, every REFRESH_MS while the Finance view is shown;
// ``now``: at once (the view was opened, or a period closed).
export async function refreshPeriods(now = false) {
  if (!visible() || (!now && Date.now() - readAt < REFRESH_MS)) return;
  // A reading under way may have started before what ``now`` is for (a close).
  if (reading && !now) return reading;
  if (reading) await reading.catch(() => {});
  readAt = Date.now();
  reading = read()
    .catch((error) => {
      if (error instanceof Unauthorized) throw error;
      say(`Periods unreadable: ${error.message}`, true);
    })
    .finally(() => {
      reading = null;
    });
  return reading;
}

// The Finance view was opened: whether this tab may close a period, then its report.
export async function showPeriods() {
  if (!visible()) return;
  fillKinds();
  try {
    operator = await mayOperate();
  } catch {
    operator = false;
  }
  // The board's refresh may have read them a moment ago: draw the button then.
  if (reading) await reading.catch(() => {});
  if (periods.length && Date.now() - readAt < 1000) renderPeriods();
  else await refreshPeriods(true);
  markBalancesOverflow(); // measured hidden (another view), the box was never "over"
}

export function forgetPeriods() {
  readAt = -Infinity;
  operator = false;
  periods = [];
  loaded = { period: null, kind: null, items: [] };
}

// "2026-12" is followed by "2027-01"; another name by none suggested.
function suggestNext(name) {
  const month = /^(\d{4})-(\d{2})$/.exec(name);
  if (!month) return "";
  const [year, mm] = [Number(month[1]), Number(month[2])];
  if (mm < 1 || mm > 12) return "";
  return mm === 12 ? `${year + 1}-01` : `${month[1]}-${String(mm + 1).padStart(2, "0")}`;
}

// What the close would carry over, as it counts it: the open disputes of each
// kind (the open period's balances' in_dispute) and the dead letters waiting.
function carriedNow(items, summary) {
  const byKind = new Map();
  for (const b of items) {
    if (!b.in_dispute.count) continue;
    const key = `${b.kind}\u0000${b.currency}`;
    const entry = byKind.get(key) || { kind: b.kind, currency: b.currency, count: 0, variances: [] };
    entry.count += b.in_dispute.count;
    entry.variances.push(b.in_dispute.variance);
    byKind.set(key, entry);
  }
  const disputes = [...byKind.entries()].sort().map(([, e]) => ({ kind: e.kind, currency: e.currency, count: e.count, variance: decimalSum(e.variances) }));
  const dead = summary.dead_letters.filter((d) => d.status === "dead");
  return {
    disputes,
    letters: dead.reduce((n, d) => n + d.count, 0),
    lines: dead.reduce((n, d) => n + d.lines, 0),
  };
}

function confirmation(open, carried) {
  const disputes = carried.disputes.map((d) => {
    const li = el("li", `${kindLabel(d.kind)}: ${count(d.count)} open dispute${d.count === 1 ? "" : "s"}, variance (claimed - model) ${inCurrency(d)}${money(d.variance, d.kind)}`);
    li.dataset.kind = d.kind;
    return li;
  });
  if (!disputes.length) disputes.push(el("li", "none open", "muted"));
  const list = el("ul", null, "carried");
  list.append(...disputes);
  const letters = carried.letters
    ? `${count(carried.letters)} dead letter${carried.letters === 1 ? "" : "s"} waiting (${lines(carried.lines)}): they settle into a later period once requeued.`
    : "No dead letter waiting.";
  $("close-facts").replaceChildren(
    el("p", `It holds ${count(open.rows)} ledger rows, opened ${when(open.opened_at)}. Once closed it never changes: corrections book into the next period.`),
    totalsTable(open.totals, "Its totals, by kind and outcome"),
    el("p", "Disputes carried over, still open:"),
    list,
    el("p", letters, "letters"),
  );
}

async function askToClose() {
  say("");
  $("close-error").textContent = "";
  try {
    const page = await api("/v1/periods");
    periods = page.items;
    renderPeriods();
    const open = closable();
    if (!open) return say("No period is open.", true);
    const [balances, summary] = await Promise.all([
      api(`/v1/balances?${new URLSearchParams({ period: open.name })}`),
      api("/v1/dashboard/summary?range=10m"),
    ]);
    $("close-name").textContent = open.name;
    $("close-form").dataset.period = open.name;
    confirmation(open, carriedNow(balances.items, summary));
    // An ended period's cut opened the next already: the close names none.
    $("close-next").required = !ended(open);
    $("close-next").closest("label").hidden = ended(open);
    $("close-next").value = ended(open) ? "" : suggestNext(open.name);
    $("close-note").value = "";
    $("close-dialog").showModal();
    $("close-next").focus();
  } catch (error) {
    say(`Could not prepare the close: ${error.message}`, true);
  }
}

async function close(event) {
  event.preventDefault();
  const body = { period: $("close-form").dataset.period };
  const next = $("close-next").value.trim();
  if (next) body.next = next;
  const note = $("close-note").value.trim();
  if (note) body.note = note;
  $("close-confirm").disabled = true;
  try {
    const closed = await api("/admin/periods/close", { method: "POST", body, asOperator: true });
    $("close-dialog").close();
    say(`Closed ${closed.name} (${count(closed.rows)} rows; journal SHA-256 ${closed.journal_sha256}); ${closed.next} is open.`);
    // The closed period's balances next, read again: they are final now.
    $("bal-period").value = closed.name;
    loaded = { period: null, kind: null, items: [] };
    await refreshPeriods(true);
  } catch (error) {
    const needsOperator = error instanceof Forbidden || error instanceof Unauthorized;
    $("close-error").textContent = needsOperator ? "Closing a period needs an operator token." : `Refused: ${error.message}`;
  } finally {
    $("close-confirm").disabled = false;
  }
}

export function wirePeriods() {
  $("bal-period").addEventListener("change", showBalances);
  $("bal-kind").addEventListener("change", showBalances);
  $("bal-partition").addEventListener("input", renderBalances);
  $("bal-filters").addEventListener("submit", (event) => event.preventDefault());
  window.addEventListener("resize", markBalancesOverflow);
  $("close-period").addEventListener("click", askToClose);
  $("close-form").addEventListener("submit", close);
  $("close-cancel").addEventListener("click", () => $("close-dialog").close());
}
