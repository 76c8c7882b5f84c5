// The dispute queue (#disputes): filtered and paged as GET /v1/disputes, each
// row at its kind's quantum and linked to its line's story. With an operator
// token, decisions: one dispute (accept_claim, accept_model, settle_at with an
// amount) or the selected ones, after a confirmation stating their count and
// money; a note is always required. A viewer sees the same page without them.
import { Forbidden, Unauthorized, api, mayOperate, setOperatorToken } from "./api.js";
import { $, cell, el, fill, link, row } from "./dom.js";
import { count, decimalSum, money, moneyOfKinds, when } from "./format.js";
import { jobLink } from "./job.js";

const PAGE = 100;
let shown = [];
let cursor = null;
let operator = false;

export const disputesInHash = () => location.hash === "#disputes";

function say(text, isError = false) {
  $("disputes-page-error").textContent = isError ? text : "";
  $("disputes-page-done").textContent = isError ? "" : text;
}

function filters() {
  const query = new URLSearchParams({ limit: String(PAGE) });
  for (const [name, id] of [
    ["status", "dq-status"],
    ["kind", "dq-kind"],
    ["partition_key", "dq-partition"],
    ["job_id", "dq-job"],
    ["min_abs_variance", "dq-min"],
  ]) {
    const value = $(id).value.trim();
    if (value) query.set(name, value);
  }
  return query;
}

// How a dispute was decided: the decision and what it pays, who decided
// (the operator token's fingerprint) and when, and the note saying why.
export function resolutionOf(resolution, kind) {
  const span = el("span", null, "resolution");
  if (!resolution) return span;
  span.append(
    el("strong", `${resolution.decision} at ${money(resolution.amount, kind)}`, "decision"),
    " ",
    el("span", `by ${resolution.resolved_by}, ${when(resolution.resolved_at)}`, "muted decider"),
    " ",
    el("q", resolution.note, "note"),
  );
  return span;
}

function disputeRow(d) {
  const pick = el("input");
  pick.type = "checkbox";
  pick.className = "pick";
  pick.disabled = d.status !== "open";
  pick.setAttribute("aria-label", `select dispute ${d.id}`);
  const tr = row([
    cell(pick, "decide"),
    el("td", String(d.id), "num"),
    el("td", d.kind),
    el("td", d.partition_key),
    el("td", `${d.document_id} / ${d.line_ref}`),
    el("td", money(d.claimed_amount, d.kind), "num"),
    el("td", money(d.model_amount, d.kind), "num"),
    el("td", money(d.variance, d.kind), "num"),
    el("td", d.status, `status-${d.status}`),
    cell(resolutionOf(d.resolution, d.kind)),
    jobLink(d.job_id),
    el("td", when(d.opened_at)),
    cell(link("story", `#identity/${d.reconciliation_key}`)),
  ]);
  tr.dataset.disputeId = String(d.id);
  tr.dataset.status = d.status;
  return tr;
}

async function load(append) {
  const query = filters();
  if (append && cursor) query.set("cursor", cursor);
  const page = await api(`/v1/disputes?${query}`);
  shown = append ? shown.concat(page.items) : page.items;
  cursor = page.next_cursor;
  const rows = page.items.map(disputeRow);
  const tbody = $("disputes-table").tBodies[0];
  if (append) tbody.append(...rows);
  else fill(tbody, rows.length ? rows : [row([el("td", "no dispute matches", "muted")])]);
  $("disputes-more").hidden = !cursor;
  for (const node of document.querySelectorAll("#disputes-table .decide")) node.hidden = !operator;
  labelSelectAll();
}

// Select-all reaches the open disputes shown here, not the whole queue: it says
// how many, and that more pages are left out.
function labelSelectAll() {
  const open = document.querySelectorAll("#disputes-table input.pick:not(:disabled)").length;
  const text = `all ${count(open)} on this page${cursor ? " (more pages not included)" : ""}`;
  $("dq-all-label").textContent = text;
  $("dq-all").setAttribute("aria-label", `select ${text}`);
  $("dq-all").checked = false;
}

function selected() {
  const ids = [...document.querySelectorAll("#disputes-table tr")]
    .filter((tr) => tr.querySelector("input.pick:checked"))
    .map((tr) => Number(tr.dataset.disputeId));
  return shown.filter((d) => ids.includes(d.id));
}

// What a decision pays for each dispute, for the confirmation.
function paid(d, decision, amount) {
  if (decision === "accept_claim") return d.claimed_amount;
  if (decision === "accept_model") return d.model_amount;
  return amount;
}

async function decide(event) {
  event.preventDefault();
  const chosen = selected();
  const decision = $("dq-decision").value;
  const amount = $("dq-amount").value.trim();
  const note = $("dq-note").value.trim();
  if (!chosen.length) return say("Select the disputes to decide first.", true);
  if (!note) return say("A decision needs a note saying why.", true);
  if (decision === "settle_at" && chosen.length !== 1) return say("settle_at decides one dispute at a time.", true);
  if (decision === "settle_at" && !amount) return say("settle_at needs the amount to settle at.", true);
  const kinds = new Set(chosen.map((d) => d.kind));
  const total = decimalSum(chosen.map((d) => paid(d, decision, amount)));
  const shownTotal = moneyOfKinds(total, kinds);
  const what = `${count(chosen.length)} dispute${chosen.length === 1 ? "" : "s"}`;
  if (!window.confirm(`Decide ${what} as ${decision}, paying ${shownTotal} in all?`)) return;
  const body = { decision, note };
  if (decision === "settle_at") body.amount = amount;
  let done = 0;
  try {
    for (const d of chosen) {
      await api(`/admin/disputes/${d.id}/resolve`, { method: "POST", body, asOperator: true });
      done += 1;
    }
    say(`Resolved ${what} (${decision}, ${shownTotal}).`);
    $("dq-note").value = "";
    $("dq-amount").value = "";
  } catch (error) {
    const needsOperator = error instanceof Forbidden || error instanceof Unauthorized;
    say(needsOperator ? "Deciding needs an operator token." : `Resolved ${done} of ${chosen.length}: ${error.message}`, true);
  }
  await load(false);
}

export async function showDisputes() {
  const visible = disputesInHash();
  $("disputes-page").hidden = !visible;
  if (!visible) return;
  say("");
  try {
    operator = await mayOperate();
    $("dq-decide").hidden = !operator;
    $("dq-operator").hidden = operator;
    await load(false);
  } catch (error) {
    say(`Could not load disputes: ${error.message}`, true);
  }
}

export function wireDisputes() {
  $("dq-filters").addEventListener("submit", (event) => {
    event.preventDefault();
    load(false).catch((error) => say(`Could not load disputes: ${error.message}`, true));
  });
  $("disputes-more").addEventListener("click", () => load(true));
  $("dq-decide").addEventListener("submit", decide);
  $("dq-operator").addEventListener("submit", (event) => {
    event.preventDefault();
    setOperatorToken($("dq-operator-token").value.trim());
    $("dq-operator-token").value = "";
    showDisputes();
  });
  $("dq-all").addEventListener("change", () => {
    for (const box of document.querySelectorAll("#disputes-table input.pick:not(:disabled)")) box.checked = $("dq-all").checked;
  });
}
