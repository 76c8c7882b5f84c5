// Deductions (#deductions): what payers took off their remittances. The aging
// per partition (GET /v1/deductions/aging: the open amount in buckets of days,
// the amount past its window, the days outstanding) with its totals, the open
// amount by reason class, the deductions filtered as GET /v1/deductions, and the
// recent remittances (GET /v1/remittances). A remittance's page
// (#remittance/<id>): its balance check, lines, adjustments, deductions with
// their matches, and the 997 sent for it. With an operator token, a disputed
// deduction is accepted (written off) or denied (to recover), with a required
// note, after a confirmation stating its amount; a viewer sees no buttons.
// Amounts arrive at their kind's quantum: shown grouped, as sent.
import { Forbidden, Unauthorized, api, mayOperate, operatorTokenForm } from "./api.js";
import { $, cell, el, fill, link, markOverflow, row } from "./dom.js";
import { count, decimal, when } from "./format.js";

const PAGE = 100;
const REMITTANCES_SHOWN = 20;
const BUCKETS = ["0-30", "31-60", "61-90", "90+"];
const DECIDED = { accept: "Accepted", deny: "Denied" };

let cursor = null;
let operator = false;

export const deductionsInHash = () => location.hash === "#deductions";

export function remittanceInHash() {
  const match = location.hash.match(/^#remittance\/([^/]+)$/);
  return match ? decodeURIComponent(match[1]) : null;
}

const remittanceHash = (id) => `#remittance/${encodeURIComponent(id)}`;
const amount = (value) => (value === null || value === undefined ? "" : decimal(value));
const words = (name) => String(name).replaceAll("_", " ");
const days = (n) => (n === null || n === undefined ? "-" : `${count(n)} d`);

function say(where, text, isError = false) {
  $(`${where}-error`).textContent = isError ? text : "";
  $(`${where}-done`).textContent = isError ? "" : text;
}

function card(label, value, name) {
  const node = el("div", null, "card");
  node.append(el("span", label, "label"), el("span", value, "value"));
  if (name) node.dataset.figure = name;
  return node;
}

// The aging: a row per partition, and the totals under them.
function renderAging(aging) {
  const t = aging.totals || {};
  $("ded-cards").replaceChildren(
    card("open deductions", count(t.open_count ?? 0), "open_count"),
    card("open amount", amount(t.open_amount ?? "0"), "open_amount"),
    card("past their window", amount(t.past_window ?? "0"), "past_window"),
    card("days outstanding", days(t.days_outstanding), "days_outstanding"),
  );
  $("ded-as-of").textContent = aging.as_of ? `as of ${aging.as_of}` : "";
  const rows = aging.partitions.map((p) => {
    const tr = row([
      el("td", p.partition_key),
      el("td", count(p.open_count), "num open-count"),
      el("td", amount(p.open_amount), "num open-amount"),
      ...BUCKETS.map((b) => el("td", amount(p.buckets?.[b] ?? "0"), `num bucket`)),
      el("td", amount(p.past_window), "num past-window"),
      el("td", days(p.days_outstanding), "num days"),
    ]);
    tr.dataset.partition = p.partition_key;
    return tr;
  });
  if (!rows.length) rows.push(row([el("td", "no open deduction", "muted")]));
  fill($("ded-aging").tBodies[0], rows);
  const foot = aging.partitions.length
    ? [
        row([
          el("td", "total"),
          el("td", count(t.open_count ?? 0), "num open-count"),
          el("td", amount(t.open_amount ?? "0"), "num open-amount"),
          ...BUCKETS.map((b) => el("td", amount(t.buckets?.[b] ?? "0"), "num bucket")),
          el("td", amount(t.past_window ?? "0"), "num past-window"),
          el("td", days(t.days_outstanding), "num days"),
        ]),
      ]
    : [];
  fill($("ded-aging").tFoot, foot);
  const reasons = aging.by_reason.map((r) => {
    const tr = row([
      el("td", r.reason_class),
      el("td", count(r.open_count), "num open-count"),
      el("td", amount(r.open_amount), "num open-amount"),
    ]);
    tr.dataset.reasonClass = r.reason_class;
    return tr;
  });
  if (!reasons.length) reasons.push(row([el("td", "none open", "muted")]));
  fill($("ded-reasons").tBodies[0], reasons);
}

// What a deduction took from: each document, its outcome and amount.
function matchesOf(d) {
  const list = el("ul", null, "matches");
  for (const m of d.matches || []) {
    const item = el("li");
    item.append(link(m.document_id, `#document/${encodeURIComponent(m.document_id)}`), ` ${words(m.outcome)} ${amount(m.amount)}`);
    list.appendChild(item);
  }
  return list;
}

// Why it is disputed, or how a person decided it.
function decisionOf(d) {
  const span = el("span", null, "decision");
  if (d.decision) {
    span.append(el("strong", d.decision), " ", el("span", when(d.decided_at), "muted"));
    if (d.decision_note) span.append(" ", el("q", d.decision_note, "note"));
  } else if (d.dispute_reason) {
    span.append(el("span", words(d.dispute_reason), "muted"));
  }
  return span;
}

const decidable = (d) => d.status === "disputed" && !d.decision;

// Accept or deny, with a note: only for an operator, only while undecided.
function actionsOf(d, where) {
  const td = el("td", null, "actions decide");
  td.hidden = !operator;
  if (!decidable(d)) return td;
  const note = el("input");
  note.className = "note";
  note.maxLength = 2000;
  note.placeholder = "note (required)";
  note.setAttribute("aria-label", `note for deduction ${d.id}`);
  td.appendChild(note);
  for (const decision of ["accept", "deny"]) {
    const button = el("button", decision === "accept" ? "Accept" : "Deny", decision);
    button.type = "button";
    button.title = decision === "accept" ? "write it off" : "the payer still owes it: recover it";
    button.addEventListener("click", () => decide(d, decision, note.value.trim(), where));
    td.appendChild(button);
  }
  return td;
}

// A remittance's id is long: its first characters, linked to its page.
function remittanceLink(id) {
  const a = link(id.length > 10 ? `${id.slice(0, 8)}\u2026` : id, remittanceHash(id));
  a.title = id;
  return cell(a);
}

// One deduction: on the remittance's own page, without its remittance and partition.
function deductionRow(d, where) {
  const tr = row([
    el("td", String(d.id), "num"),
    ...(where === "rem" ? [] : [remittanceLink(d.remittance_id), el("td", d.partition_key)]),
    el("td", `${d.reason_class} (${d.reason_code})`, "reason"),
    el("td", d.reference || d.line_reference || ""),
    el("td", amount(d.amount), "num amount"),
    el("td", d.deducted_on || ""),
    el("td", d.due_on || "", d.past_window ? "due error" : "due"),
    el("td", days(d.days_outstanding), "num"),
    el("td", words(d.status), `status status-${d.status}`),
    cell(matchesOf(d), "matches"),
    cell(decisionOf(d), "why"),
    actionsOf(d, where),
  ]);
  tr.dataset.deductionId = String(d.id);
  tr.dataset.status = d.status;
  return tr;
}

// The decisions are the last column: a list wider than its box says so.
function markDeductionsOverflow() {
  markOverflow($("ded-table").parentElement, $("ded-scroll-hint"));
  markOverflow($("rem-deductions").parentElement, $("rem-scroll-hint"));
}

async function decide(d, decision, note, where) {
  if (!note) return say(where, "A decision needs a note saying why.", true);
  const what = decision === "accept" ? `write off ${amount(d.amount)}` : `deny it: ${amount(d.amount)} stays owed`;
  if (!window.confirm(`Deduction ${d.id} (${d.partition_key}): ${decision}, ${what}?`)) return;
  let said = [`${DECIDED[decision]} deduction ${d.id} (${amount(d.amount)}).`, false];
  try {
    await api(`/admin/deductions/${d.id}/decide`, { method: "POST", body: { decision, note }, asOperator: true });
  } catch (error) {
    const needsOperator = error instanceof Forbidden || error instanceof Unauthorized;
    said = [needsOperator ? "Deciding needs an operator token." : `Refused: ${error.message}`, true];
  }
  try {
    if (where === "ded") await loadAll();
    else await loadRemittance();
  } finally {
    say(where, ...said);
  }
}

function filters() {
  const query = new URLSearchParams({ limit: String(PAGE) });
  for (const [name, id] of [
    ["status", "ded-status"],
    ["partition_key", "ded-partition"],
    ["reason_class", "ded-reason"],
    ["aged_over", "ded-aged"],
  ]) {
    const value = $(id).value.trim();
    if (value) query.set(name, value);
  }
  return query;
}

async function loadList(append) {
  const query = filters();
  if (append && cursor) query.set("cursor", cursor);
  const page = await api(`/v1/deductions?${query}`);
  cursor = page.next_cursor;
  const rows = page.deductions.map((d) => deductionRow(d, "ded"));
  const tbody = $("ded-table").tBodies[0];
  if (append) tbody.append(...rows);
  else fill(tbody, rows.length ? rows : [row([el("td", "no deduction matches", "muted")])]);
  $("ded-more").hidden = !cursor;
  for (const node of document.querySelectorAll("#ded-table .decide")) node.hidden = !operator;
  markDeductionsOverflow();
}

function remittanceRow(r) {
  const diff = r.balance_difference;
  const tr = row([
    el("td", when(r.received_at)),
    cell(link(r.trace, remittanceHash(r.id))),
    el("td", r.payer),
    el("td", r.partition_key),
    el("td", r.source_format),
    el("td", amount(r.paid_total), "num"),
    el("td", diff ? amount(diff.difference) : "balances", diff ? "num error" : "num ok"),
    el("td", count(r.deductions), "num"),
    el("td", amount(r.matched), "num"),
    el("td", amount(r.written_off), "num"),
    el("td", amount(r.disputed), "num"),
  ]);
  tr.dataset.remittanceId = r.id;
  return tr;
}

async function loadRemittances() {
  const page = await api(`/v1/remittances?limit=${REMITTANCES_SHOWN}`);
  const rows = page.remittances.map(remittanceRow);
  if (!rows.length) rows.push(row([el("td", "no remittance yet", "muted")]));
  fill($("rem-table").tBodies[0], rows);
  markOverflow($("rem-table").parentElement);
}

async function loadAll() {
  const [aging] = await Promise.all([api("/v1/deductions/aging"), loadList(false), loadRemittances()]);
  renderAging(aging);
}

async function asOperator() {
  operator = await mayOperate();
  for (const id of ["ded-operator", "rem-operator"]) $(id).hidden = operator;
}

export async function showDeductions() {
  const visible = deductionsInHash();
  $("deductions-page").hidden = !visible;
  if (!visible) return;
  say("ded", "");
  try {
    await asOperator();
    await loadAll();
  } catch (error) {
    say("ded", `Could not load deductions: ${error.message}`, true);
  }
}

// A fact of the remittance: money in a card's large figure, words in a small one.
function fact(label, value, name, small = false) {
  const node = card(label, value, name);
  if (small) node.querySelector(".value").classList.add("small");
  return node;
}

function adjustmentsText(adjustments) {
  return (adjustments || []).map((a) => `${amount(a.amount)} (${a.reason_code}${a.reference ? `, ${a.reference}` : ""})`).join("; ");
}

export async function showRemittance() {
  const id = remittanceInHash();
  $("remittance-page").hidden = !id;
  if (!id) return;
  say("rem", "");
  $("rem-id").textContent = id;
  try {
    await asOperator();
  } catch (error) {
    return say("rem", `Could not load the remittance: ${error.message}`, true);
  }
  await loadRemittance();
}

async function loadRemittance() {
  const id = remittanceInHash();
  if (!id) return;
  try {
    const r = await api(`/v1/remittances/${encodeURIComponent(id)}`);
    $("rem-id").textContent = r.trace;
    $("rem-facts").replaceChildren(
      fact("paid", `${amount(r.paid_total)} ${r.currency}`, "paid_total"),
      fact("matched", amount(r.matched), "matched"),
      fact("written off", amount(r.written_off), "written_off"),
      fact("disputed", amount(r.disputed), "disputed"),
      fact("payer", r.payer, "payer", true),
      fact("partition", r.partition_key, "partition_key", true),
      fact("format", r.source_format, "source_format", true),
      fact("paid on", r.paid_at || "", "paid_at", true),
      fact("received", when(r.received_at), "received_at", true),
    );
    const diff = r.balance_difference;
    const check = $("rem-balance");
    check.className = diff ? "error" : "ok";
    check.dataset.balanced = String(!diff);
    check.textContent = diff
      ? `Does not balance: stated ${amount(diff.stated)}, lines and adjustments ${amount(diff.computed)}, ` +
        `${amount(diff.difference)} apart (reported, never refused).`
      : `Balances: the stated total ${amount(r.paid_total)} is the lines paid plus the standalone adjustments.`;
    const lines = (r.lines || []).map((l) =>
      row([
        el("td", l.reference),
        el("td", l.qualifier || ""),
        el("td", amount(l.invoiced), "num"),
        el("td", amount(l.discount), "num"),
        el("td", amount(l.paid), "num"),
        el("td", adjustmentsText(l.adjustments), "wrap"),
      ]),
    );
    if (!lines.length) lines.push(row([el("td", "no payment line", "muted")]));
    fill($("rem-lines").tBodies[0], lines);
    const standalone = (r.adjustments || []).map((a) =>
      row([el("td", amount(a.amount), "num"), el("td", a.reason_code), el("td", a.reference || "")]),
    );
    $("rem-adjustments").hidden = !standalone.length;
    fill($("rem-adjustments").tBodies[0], standalone);
    const deductions = (r.deductions || []).map((d) => deductionRow(d, "rem"));
    if (!deductions.length) deductions.push(row([el("td", "no deduction", "muted")]));
    fill($("rem-deductions").tBodies[0], deductions);
    for (const node of document.querySelectorAll("#rem-deductions .decide")) node.hidden = !operator;
    $("rem-997").hidden = !r.acknowledgement;
    $("rem-997-text").textContent = r.acknowledgement || "";
    markDeductionsOverflow();
  } catch (error) {
    say("rem", `Could not load the remittance: ${error.message}`, true);
  }
}

export function wireDeductions() {
  $("ded-filters").addEventListener("submit", (event) => {
    event.preventDefault();
    loadList(false).catch((error) => say("ded", `Could not load deductions: ${error.message}`, true));
  });
  $("ded-more").addEventListener("click", () => loadList(true));
  window.addEventListener("resize", markDeductionsOverflow);
  operatorTokenForm($("ded-operator"), showDeductions);
  operatorTokenForm($("rem-operator"), showRemittance);
}
