// The dead letters of one reason (#dead-letters/<reason>): what failed and
// where, and requeue or discard each one. Both need an operator token, asked
// for here and kept in this tab only.
import { Forbidden, Unauthorized, api, clearOperatorToken, hasOperatorToken, mayOperate, setOperatorToken } from "./api.js";
import { $, el, fill, row } from "./dom.js";
import { count, when } from "./format.js";
import { jobLink } from "./job.js";

let onSignOut = () => {};

export const reasonInHash = () => {
  const match = location.hash.match(/^#dead-letters\/(.+)$/);
  return match ? decodeURIComponent(match[1]) : null;
};

function say(text, isError = false) {
  $("letters-error").textContent = isError ? text : "";
  $("letters-done").textContent = isError ? "" : text;
}

async function act(letter, action) {
  const what = `dead letter ${letter.id} (${count(letter.lines)} line(s), ${letter.partition_key})`;
  let body;
  if (action === "discard") {
    const note = window.prompt(`Why discard ${what}? The note is kept in the audit log.`);
    if (note === null) return;
    if (!note.trim()) return say("A discard needs a note saying why.", true);
    if (!window.confirm(`Discard ${what}? Its lines will not be settled.`)) return;
    body = { note: note.trim() };
  } else if (!window.confirm(`Requeue ${what}? Its lines are settled again.`)) {
    return;
  }
  try {
    await api(`/admin/dead-letters/${letter.id}/${action}`, { method: "POST", body, asOperator: true });
    await showLetters();
    say(`${action === "requeue" ? "Requeued" : "Discarded"} ${what}.`);
  } catch (error) {
    say(
      error instanceof Forbidden || error instanceof Unauthorized
        ? "That needs an operator token."
        : `Could not ${action}: ${error.message}`,
      true,
    );
    if (error instanceof Forbidden || error instanceof Unauthorized) $("operator-form").hidden = false;
  }
}

function button(text, handler, className) {
  const b = el("button", text, className);
  b.type = "button";
  b.addEventListener("click", handler);
  return b;
}

// A payload as a person reads it: JSON indented, an X12 text one segment a
// line; anything else as it is.
export function readable(payload) {
  if (typeof payload !== "string") return JSON.stringify(payload, null, 2);
  try {
    return JSON.stringify(JSON.parse(payload), null, 2);
  } catch {
    const text = payload.trim();
    if (/^ISA.{100}/s.test(text)) {
      const terminator = text.charAt(105);
      return text.split(terminator).map((segment) => segment.trim()).filter(Boolean).join(`${terminator}\n`) + terminator;
    }
    return payload;
  }
}

// The whole payload, read when asked for (the list shows the failed line).
function wholePayload(letter) {
  const details = el("details");
  details.appendChild(el("summary", "whole payload"));
  details.addEventListener("toggle", async () => {
    if (!details.open || details.dataset.loaded) return;
    try {
      const detail = await api(`/admin/dead-letters/${letter.id}`, { asOperator: true });
      details.appendChild(el("pre", readable(detail.payload), "payload"));
      details.dataset.loaded = "true";
    } catch (error) {
      details.appendChild(el("p", `Could not read it: ${error.message}`, "error"));
    }
  });
  return details;
}

function letterRow(letter) {
  const where = el("td");
  where.append(el("div", letter.partition_key), el("div", `${letter.document_id || "-"} / ${letter.line_ref || "-"}`, "muted"));
  const failure = el("td", null, "wrap");
  failure.append(el("div", letter.message), el("pre", readable(letter.excerpt), "excerpt"), wholePayload(letter));
  const actions = el("td", null, "actions");
  actions.append(
    button("Requeue", () => act(letter, "requeue"), "requeue"),
    button("Discard", () => act(letter, "discard"), "discard"),
  );
  const tr = row([
    el("td", letter.id),
    jobLink(letter.job_id),
    where,
    failure,
    el("td", count(letter.attempts), "num"),
    el("td", when(letter.last_failed_at)),
    actions,
  ]);
  tr.dataset.letterId = String(letter.id);
  return tr;
}

export async function showLetters() {
  const reason = reasonInHash();
  $("letters").hidden = !reason;
  if (!reason) return;
  $("letters-reason").textContent = reason;
  const tbody = $("letters-table").tBodies[0];
  try {
    // A viewer's page asks no operator endpoint (its 403 is an error in the
    // browser's console): it asks for an operator token straight away.
    if (!(await mayOperate())) throw new Forbidden();
    const query = new URLSearchParams({ reason, status: "dead", limit: "100" });
    const page = await api(`/admin/dead-letters?${query}`, { asOperator: true });
    const rows = page.items.map(letterRow);
    fill(tbody, rows.length ? rows : [row([el("td", "none left to repair", "muted")])]);
    $("operator-form").hidden = true;
    say("");
  } catch (error) {
    fill(tbody, []);
    const badOperator = error instanceof Unauthorized && hasOperatorToken();
    if (badOperator) clearOperatorToken(); // a wrong operator token: ask again
    else if (error instanceof Unauthorized) return onSignOut("The token is no longer valid.");
    const needsOperator = error instanceof Forbidden || badOperator;
    $("operator-form").hidden = !needsOperator;
    say(needsOperator ? "Listing and repairing dead letters needs an operator token." : `Could not load dead letters: ${error.message}`, true);
  }
}

export function wireLetters(signOut) {
  onSignOut = signOut;
  $("operator-form").addEventListener("submit", (event) => {
    event.preventDefault();
    setOperatorToken($("operator-token").value.trim());
    $("operator-token").value = "";
    showLetters();
  });
}
