// Search (a document id, optionally with its partition, or a reconciliation
// key), a document's page (#document/<id>[/<partition>]: its lines in every
// job) and an identity's page (#identity/<key>: its ledger rows oldest first,
// the deltas adding up to what the line amounts to now).
import { api } from "./api.js";
import { $, cell, el, fill, link, row } from "./dom.js";
import { decimalSum, money, when } from "./format.js";
import { jobLink } from "./job.js";
import { resolutionOf } from "./disputes.js";

const KEY = /^[0-9a-f]{64}$/;
const LINES_PAGE = 200;

export function documentInHash() {
  const match = location.hash.match(/^#document\/([^/]+)(?:\/([^/]+))?$/);
  if (!match) return null;
  return { documentId: decodeURIComponent(match[1]), partition: match[2] ? decodeURIComponent(match[2]) : null };
}

export function identityInHash() {
  const match = location.hash.match(/^#identity\/([0-9a-f]{64})$/);
  return match ? match[1] : null;
}

const documentHash = (documentId, partition) =>
  `#document/${encodeURIComponent(documentId)}${partition ? `/${encodeURIComponent(partition)}` : ""}`;

function search(event) {
  event.preventDefault();
  const text = $("search-text").value.trim();
  const partition = $("search-partition").value.trim();
  if (!text) return;
  location.hash = KEY.test(text) ? `#identity/${text}` : documentHash(text, partition);
}

function identityLink(key) {
  if (!key) return el("td", "");
  const td = cell(link("story", `#identity/${key}`));
  td.title = key;
  return td;
}

export async function showDocument() {
  const wanted = documentInHash();
  $("document").hidden = !wanted;
  if (!wanted) return;
  const { documentId, partition } = wanted;
  $("document-id").textContent = documentId;
  $("document-partition").textContent = partition ? ` of ${partition}` : " (every partition)";
  $("document-error").textContent = "";
  try {
    const query = new URLSearchParams({ document_id: documentId, limit: String(LINES_PAGE) });
    if (partition) query.set("partition_key", partition);
    const page = await api(`/v1/lines?${query}`);
    const rows = page.items.map((line) => {
      const tr = row([
        jobLink(line.job_id),
        el("td", line.partition_key || ""),
        el("td", line.line_ref),
        el("td", String(line.contract_version), "num"),
        el("td", line.outcome, `outcome outcome-${line.outcome}`),
        el("td", line.reason || ""),
        el("td", money(line.amount, line.kind), "num"),
        el("td", money(line.claimed_amount, line.kind), "num"),
        el("td", money(line.delta, line.kind), "num"),
        el("td", line.dispute_status || ""),
        identityLink(line.reconciliation_key),
      ]);
      tr.dataset.outcome = line.outcome;
      tr.dataset.line = line.line_ref;
      return tr;
    });
    fill($("document-lines").tBodies[0], rows.length ? rows : [row([el("td", "no line of this document", "muted")])]);
    $("document-more").hidden = !page.next_cursor;
  } catch (error) {
    $("document-error").textContent = `Could not load the document: ${error.message}`;
  }
}

export async function showIdentity() {
  const key = identityInHash();
  $("identity").hidden = !key;
  if (!key) return;
  $("identity-key").textContent = key;
  $("identity-error").textContent = "";
  try {
    const story = await api(`/v1/identities/${key}`);
    const { kind } = story;
    const facts = [
      ["kind", kind],
      ["partition", story.partition_key],
      ["document", story.document_id],
      ["line", story.line_ref],
      ["amount now", money(story.amount_now, kind)],
    ];
    $("identity-facts").replaceChildren(
      ...facts.map(([label, value]) => {
        const card = el("div", null, "card");
        card.append(el("span", label, "label"), el("span", value, "value small"));
        card.dataset.fact = label;
        return card;
      }),
    );
    $("identity-document").replaceChildren(
      link(`all lines of ${story.document_id}`, documentHash(story.document_id, story.partition_key)),
    );
    // A resolved row shows its dispute's decision, note and decider.
    const decided = new Map(
      story.disputes.filter((d) => d.resolution).map((d) => [d.resolution.ledger_entry_id, d.resolution]),
    );
    fill(
      $("identity-entries").tBodies[0],
      story.entries.map((entry) => {
        const tr = row([
          el("td", String(entry.ledger_entry_id), "num"),
          jobLink(entry.job_id),
          el("td", String(entry.contract_version), "num"),
          el("td", entry.outcome, `outcome outcome-${entry.outcome}`),
          el("td", money(entry.amount, kind), "num"),
          el("td", money(entry.claimed_amount, kind), "num"),
          el("td", money(entry.delta, kind), "num"),
          el("td", entry.supersedes_id === null ? "" : String(entry.supersedes_id), "num"),
          el("td", when(entry.created_at)),
          cell(resolutionOf(decided.get(entry.ledger_entry_id), kind)),
        ]);
        tr.dataset.outcome = entry.outcome;
        return tr;
      }),
    );
    // The deltas, added here exactly, against what the ledger says the line amounts to.
    const total = decimalSum(story.entries.map((entry) => entry.delta));
    const addsUp = money(total, kind) === money(story.amount_now, kind);
    const check = $("identity-sum");
    check.textContent = addsUp
      ? `The deltas add up to ${money(total, kind)}, what the line amounts to now.`
      : `The deltas add up to ${money(total, kind)}, not ${money(story.amount_now, kind)}.`;
    check.className = addsUp ? "ok" : "error";
    check.dataset.addsUp = String(addsUp);
    const dispute = story.open_dispute;
    if (dispute) {
      $("identity-dispute").replaceChildren(
        `Open dispute ${dispute.id}: claimed ${money(dispute.claimed_amount, kind)}, ` +
          `model ${money(dispute.model_amount, kind)}, variance ${money(dispute.variance, kind)}. `,
        link("Decide it in the dispute queue", "#disputes"),
      );
    } else {
      $("identity-dispute").textContent = "No open dispute.";
    }
  } catch (error) {
    $("identity-error").textContent = `Could not load the line: ${error.message}`;
  }
}

export function wireSearch() {
  $("search").addEventListener("submit", search);
}
