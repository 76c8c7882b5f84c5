// Trading partners: the list (#partners: each partner's last file and the share
// of its files refused) and a partner's page (#partner/<ISA05>/<ISA06>: its
// profile, latest files (a refused one with its message and the 997 it
// carried), waiting lines by reason, open disputes).
import { api } from "./api.js";
import { $, cell, el, fill, link, row } from "./dom.js";
import { count, when } from "./format.js";
import { jobLink } from "./job.js";

export const partnersInHash = () => location.hash === "#partners";

export function partnerInHash() {
  const match = location.hash.match(/^#partner\/([^/]+)\/([^/]+)$/);
  return match ? { qualifier: decodeURIComponent(match[1]), id: decodeURIComponent(match[2]) } : null;
}

const partnerHash = (p) =>
  `#partner/${encodeURIComponent(p.isa_qualifier)}/${encodeURIComponent(p.isa_id)}`;
const percent = (rate) => `${Math.round(rate * 100)}%`;

// Why a file was refused: its codes, the 422's message, and the 997 the
// refusal carried (folded: it is as long as the file has sets).
function refusedFor(f) {
  const td = el("td", null, "refusal");
  td.appendChild(el("div", f.refusal_codes.join(", ")));
  if (f.refusal_message) td.appendChild(el("div", f.refusal_message, "muted"));
  if (f.acknowledgement) {
    const details = el("details");
    details.appendChild(el("summary", "997 sent"));
    details.appendChild(el("pre", f.acknowledgement));
    td.appendChild(details);
  }
  return td;
}

export async function showPartners() {
  const shown = partnersInHash();
  $("partners-page").hidden = !shown;
  if (!shown) return;
  $("partners-error").textContent = "";
  try {
    const page = await api("/v1/partners");
    fill(
      $("partners-table").querySelector("tbody"),
      page.items.map((p) => {
        const tr = row([
          cell(link(`${p.isa_qualifier}/${p.isa_id}`, partnerHash(p))),
          el("td", p.name),
          el("td", String(p.contract_version), "num"),
          el("td", p.acknowledge),
          el("td", p.last_file_at ? when(p.last_file_at) : "none yet"),
          el("td", percent(p.refusal_rate), p.refusal_rate > 0 ? "num warn" : "num"),
        ]);
        tr.dataset.partner = `${p.isa_qualifier}/${p.isa_id}`;
        return tr;
      }),
    );
    $("partners-none").hidden = page.items.length > 0;
  } catch (error) {
    $("partners-error").textContent = error.message;
  }
}

export async function showPartner() {
  const wanted = partnerInHash();
  $("partner-page").hidden = !wanted;
  if (!wanted) return;
  $("partner-error").textContent = "";
  const path = `/v1/partners/${encodeURIComponent(wanted.qualifier)}/${encodeURIComponent(wanted.id)}`;
  try {
    const p = await api(path);
    const h = p.health;
    $("partner-name").textContent = `${p.name} (${p.isa_qualifier}/${p.isa_id})`;
    $("partner-profile").textContent =
      `contract version ${p.contract_version}` +
      (p.partition_key ? `, partition ${p.partition_key}` : "") +
      (p.period ? `, period ${p.period}` : "") +
      `, 997s: ${p.acknowledge}` +
      (p.key_ids ? `, sent only by key(s) ${p.key_ids.join(", ")}` : "");
    const files = h.accepted_files + h.refused_files;
    const summary = $("partner-files-summary");
    summary.textContent = `${count(files)} file(s), ${count(h.refused_files)} refused (${percent(h.refusal_rate)})`;
    summary.dataset.refused = String(h.refused_files);
    fill(
      $("partner-files").querySelector("tbody"),
      h.files.map((f) =>
        row([
          el("td", when(f.received_at)),
          f.job_id ? jobLink(f.job_id) : el("td", "refused", "error"),
          el("td", count(f.sets_accepted), "num"),
          el("td", count(f.sets_refused), "num"),
          refusedFor(f),
        ]),
      ),
    );
    const waiting = Object.entries(h.dead_letters);
    fill(
      $("partner-letters").querySelector("tbody"),
      waiting.map(([reason, n]) => {
        const tr = row([
          cell(link(reason, `#dead-letters/${encodeURIComponent(reason)}`)),
          el("td", count(n), "num"),
        ]);
        tr.dataset.reason = reason;
        return tr;
      }),
    );
    $("partner-letters-none").hidden = waiting.length > 0;
    $("partner-letters").hidden = waiting.length === 0;
    const disputes = $("partner-disputes");
    disputes.textContent = `${count(h.open_disputes.count)} open dispute(s), variance ${h.open_disputes.variance}`;
    disputes.dataset.count = String(h.open_disputes.count);
  } catch (error) {
    $("partner-error").textContent = error.message;
  }
}
