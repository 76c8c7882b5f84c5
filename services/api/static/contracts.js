// Contracts (#contracts): the published contracts, a row per kind and partition
// with its versions and the newest one's date, and a contract's page
// (#contract/<kind>/<partition>): its versions with each body's SHA-256, the
// newest body, and a preview of a pasted body (POST .../preview) over the
// documents of a period, of some jobs or these ids. A preview publishes
// nothing and writes no ledger row: this page never publishes. Contracts are
// an operator's to read: a viewer's page asks for an operator token first, and
// asks no operator endpoint before it has one (a 403 is a console error).
import { Forbidden, Refused, Unauthorized, api, clearOperatorToken, hasOperatorToken, mayOperate, operatorTokenForm } from "./api.js";
import { $, cell, el, fill, link, row } from "./dom.js";
import { QUANTUM_PLACES, count, decimal, when } from "./format.js";

// Every version is listed, oldest first and paged: this many pages of this many
// at most, then the page asks for a narrower filter.
const PAGE = 500;
const PAGES_READ = 20;
const LARGEST = 20;

// The contract whose page was drawn last: its pasted body and selection are
// kept while the page is drawn again (an operator token given, a sign-in).
let drawn = null;
// Each drawing of the page counts: one started later (a sign-in's route and a
// hashchange at once) is the one that draws, never both in turn.
let drawing = 0;
let onSignOut = () => {};

export const contractsInHash = () => location.hash === "#contracts";

export function contractInHash() {
  const match = location.hash.match(/^#contract\/([^/]+)\/([^/]+)$/);
  return match ? { kind: decodeURIComponent(match[1]), partition: decodeURIComponent(match[2]) } : null;
}

const contractHash = (kind, partition) => `#contract/${encodeURIComponent(kind)}/${encodeURIComponent(partition)}`;
// The partition as one path segment: "A/B" is a partition, never a version "B".
const contractPath = (c) => `/v1/contracts/${encodeURIComponent(c.kind)}/${encodeURIComponent(c.partition)}`;
const keyOf = (c) => `${c.kind}\u0000${c.partition}`;
const amount = (value) => (value === null || value === undefined ? "" : decimal(value));
const plural = (n, word) => `${count(n)} ${word}${n === 1 ? "" : "s"}`;

function say(where, text, isError = false) {
  $(`${where}-error`).textContent = isError ? text : "";
  $(`${where}-done`).textContent = isError ? "" : text;
}

// Whether this tab reads as an operator; the token form shown when not.
async function operatorOr(form) {
  const operator = await mayOperate();
  $(form).hidden = operator;
  return operator;
}

// A wrong operator token (unknown, or a viewer's) is forgotten, so that the
// form asks again; a signed-in token no longer valid signs out.
function refused(where, form, error, what) {
  const badOperator = (error instanceof Unauthorized || error instanceof Forbidden) && hasOperatorToken();
  if (badOperator) clearOperatorToken();
  else if (error instanceof Unauthorized) return onSignOut("The token is no longer valid.");
  const needsOperator = error instanceof Forbidden || badOperator;
  $(form).hidden = !needsOperator;
  say(where, needsOperator ? `${what} needs an operator token.` : `Could not load ${what.toLowerCase()}: ${error.message}`, true);
}

function fillKinds() {
  const select = $("contracts-kind");
  if (select.options.length > 1) return;
  for (const kind of Object.keys(QUANTUM_PLACES).sort()) {
    const option = el("option", kind);
    option.value = kind;
    select.appendChild(option);
  }
}

async function readVersions() {
  const query = new URLSearchParams({ limit: String(PAGE) });
  const kind = $("contracts-kind").value;
  const partition = $("contracts-partition").value.trim();
  if (kind) query.set("kind", kind);
  if (partition) query.set("partition_key", partition);
  const versions = [];
  let cursor = null;
  let pages = 0;
  do {
    if (cursor) query.set("cursor", cursor);
    const page = await api(`/v1/contracts?${query}`, { asOperator: true });
    versions.push(...page.items);
    cursor = page.next_cursor;
    pages += 1;
  } while (cursor && pages < PAGES_READ);
  return { versions, more: Boolean(cursor) };
}

// A row per kind and partition: how many versions, and the newest one.
function byContract(versions) {
  const contracts = new Map();
  for (const v of versions) {
    const key = `${v.kind}\u0000${v.partition_key}`;
    const entry = contracts.get(key) || { kind: v.kind, partition_key: v.partition_key, versions: 0, newest: v };
    entry.versions += 1;
    if (v.version > entry.newest.version) entry.newest = v;
    contracts.set(key, entry);
  }
  return [...contracts.values()].sort((a, b) => a.kind.localeCompare(b.kind) || a.partition_key.localeCompare(b.partition_key));
}

async function loadList() {
  const { versions, more } = await readVersions();
  const contracts = byContract(versions);
  const rows = contracts.map((c) => {
    const tr = row([
      el("td", c.kind),
      cell(link(c.partition_key, contractHash(c.kind, c.partition_key))),
      el("td", count(c.versions), "num versions"),
      el("td", String(c.newest.version), "num newest"),
      el("td", when(c.newest.created_at)),
    ]);
    tr.dataset.kind = c.kind;
    tr.dataset.partition = c.partition_key;
    return tr;
  });
  if (!rows.length) rows.push(row([el("td", "no contract published", "muted")]));
  fill($("contracts-table").tBodies[0], rows);
  $("contracts-note").textContent = more
    ? `More than ${count(versions.length)} versions: the contracts of the oldest ${count(versions.length)} are shown, their counts maybe short. Narrow by kind or partition.`
    : `${plural(contracts.length, "contract")}, ${plural(versions.length, "version")}.`;
}

export async function showContracts() {
  const shown = contractsInHash();
  $("contracts-page").hidden = !shown;
  if (!shown) return;
  say("contracts", "");
  fillKinds();
  try {
    if (!(await operatorOr("contracts-operator"))) throw new Forbidden();
    await loadList();
  } catch (error) {
    fill($("contracts-table").tBodies[0], []);
    refused("contracts", "contracts-operator", error, "Contracts");
  }
}

// The selection a preview settles: the last closed period's documents (the
// newest closed: its money no longer moves), else the user names one.
async function lastClosed() {
  const { items } = await api("/v1/periods");
  return items.find((p) => p.status === "closed") || null;
}

function defaultSelection(closed) {
  $("cp-by").value = "period";
  $("cp-select").value = closed ? closed.name : "";
  $("cp-select-note").textContent = closed
    ? `the last closed period, ${closed.name}`
    : "No period is closed yet: type a period's name, or choose document or job ids.";
  $("cp-select-note").dataset.closed = closed ? closed.name : "";
}

function renderVersions(items) {
  const newestFirst = [...items].sort((a, b) => b.version - a.version);
  const rows = newestFirst.map((v) => {
    const tr = row([el("td", String(v.version), "num"), el("td", when(v.created_at)), cell(el("code", v.body_sha256, "sha256"), "sha")]);
    tr.dataset.version = String(v.version);
    return tr;
  });
  if (!rows.length) rows.push(row([el("td", "no version published", "muted")]));
  fill($("contract-versions").tBodies[0], rows);
}

export async function showContract() {
  const wanted = contractInHash();
  const mine = ++drawing;
  $("contract-page").hidden = !wanted;
  if (!wanted) return;
  say("contract", "");
  $("contract-name").textContent = `${wanted.kind} / ${wanted.partition}`;
  const fresh = drawn === null || keyOf(drawn) !== keyOf(wanted);
  if (fresh) {
    clearPreview();
    $("cp-body").value = "";
    $("contract-body").textContent = "";
    $("contract-newest").textContent = "";
    fill($("contract-versions").tBodies[0], []);
  }
  try {
    if (!(await operatorOr("contract-operator"))) throw new Forbidden();
    const list = await api(contractPath(wanted), { asOperator: true });
    const newest = [...list.items].sort((a, b) => b.version - a.version)[0];
    const published = newest ? await api(`${contractPath(wanted)}/${newest.version}`, { asOperator: true }) : null;
    const closed = fresh ? await lastClosed() : null;
    // Only the latest drawing draws: an earlier one's answers may come last.
    if (mine !== drawing) return;
    renderVersions(list.items);
    const body = published ? JSON.stringify(published.body, null, 2) : "";
    $("contract-newest").textContent = published
      ? `Version ${published.version}, in ${published.currency}, published ${when(published.created_at)}:`
      : "No version is published for this partition yet.";
    $("contract-body").textContent = body;
    if (fresh || !$("cp-body").value) $("cp-body").value = body;
    $("cp-body").dataset.newest = body;
    if (fresh) defaultSelection(closed);
    drawn = wanted;
  } catch (error) {
    if (mine !== drawing) return;
    refused("contract", "contract-operator", error, "Contracts");
  }
}

function clearPreview() {
  $("cp-result").hidden = true;
  $("cp-error").textContent = "";
  $("cp-error").dataset.code = "";
  $("cp-done").textContent = "";
}

// A refusal as the API words it: its code, its message, and each detail's
// field that the message does not already name.
function showRefusal(code, message, details = []) {
  const node = $("cp-error");
  node.dataset.code = code || "";
  const fields = details
    .filter((d) => d && d.msg && !String(message).includes(d.msg))
    .map((d) => (Array.isArray(d.loc) ? `${d.loc.join(".")}: ${d.msg}` : d.msg));
  node.replaceChildren(el("strong", code || "refused"), `: ${message}`);
  if (fields.length) {
    const list = el("ul", null, "details");
    list.append(...fields.map((text) => el("li", text)));
    node.appendChild(list);
  }
}

const idsIn = (text) => text.split(/[\s,]+/).filter(Boolean);

// |delta| as a whole number at ``places``, to rank documents exactly: never a float.
function magnitude(value, places) {
  const [whole, fraction = ""] = String(value).replace(/^[-+]/, "").split(".");
  return BigInt((whole || "0") + fraction.padEnd(places, "0"));
}

const changesText = (changes) =>
  Object.entries(changes || {})
    .map(([change, n]) => `${change}: ${count(n)}`)
    .join("; ");

function totalsRows(p) {
  const rows = Object.entries(p.totals)
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([partition, t]) => {
      const tr = row([
        el("td", partition),
        el("td", count(t.documents), "num documents"),
        el("td", count(t.lines), "num lines"),
        el("td", amount(t.amount_now), "num now"),
        el("td", amount(t.amount_preview), "num preview"),
        el("td", amount(t.delta), "num delta"),
        el("td", p.currency, "currency"),
        el("td", changesText(t.changes), "changes"),
      ]);
      tr.dataset.partition = partition;
      return tr;
    });
  if (!rows.length) rows.push(row([el("td", "no document selected", "muted")]));
  return rows;
}

// The outcome changes of every partition, added up: `posted→disputed: n`.
function changeRows(p) {
  const changes = new Map();
  for (const t of Object.values(p.totals)) {
    for (const [change, n] of Object.entries(t.changes || {})) changes.set(change, (changes.get(change) || 0) + n);
  }
  const rows = [...changes.entries()]
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([change, n]) => {
      const tr = row([el("td", change), el("td", count(n), "num")]);
      tr.dataset.change = change;
      return tr;
    });
  if (!rows.length) rows.push(row([el("td", "no line's outcome would change", "muted")]));
  return rows;
}

function outcomeCards(p) {
  const o = p.outcomes;
  const card = (label, value, name) => {
    const node = el("div", null, "card");
    node.append(el("span", label, "label"), el("span", value, "value"));
    node.dataset.figure = name;
    return node;
  };
  return [
    card("lines", count(o.lines), "lines"),
    card("posted", count(o.posted), "posted"),
    card("disputed", count(o.disputed), "disputed"),
    card("duplicate", count(o.duplicate), "duplicate"),
    card("dead-lettered", count(o.dead_lettered), "dead_lettered"),
    card(`amount posted (${p.currency})`, amount(o.amount_posted), "amount_posted"),
    card(`claimed, disputed (${p.currency})`, amount(o.amount_disputed), "amount_disputed"),
    card(`delta posted (${p.currency})`, amount(o.delta_posted), "delta_posted"),
    card(`delta disputed (${p.currency})`, amount(o.delta_disputed), "delta_disputed"),
    card(`delta (${p.currency})`, amount(o.delta), "delta"),
  ];
}

// The documents whose money or outcome would change, the largest |delta| first
// (ties by document id): those shown, and how many changed.
export function largest(documents, shown = LARGEST) {
  const changed = documents.filter((d) => magnitude(d.delta, 0) !== 0n || Object.keys(d.changes || {}).length);
  const places = Math.max(0, ...changed.map((d) => (String(d.delta).split(".")[1] || "").length));
  const ranked = changed
    .map((d) => ({ d, size: magnitude(d.delta, places) }))
    .sort((a, b) => (a.size === b.size ? a.d.document_id.localeCompare(b.d.document_id) : a.size < b.size ? 1 : -1))
    .slice(0, shown)
    .map(({ d }) => d);
  return { documents: ranked, changed: changed.length };
}

function largestRows(p) {
  const { documents, changed } = largest(p.documents);
  const rows = documents.map((d) => {
    const tr = row([
      cell(link(d.document_id, `#document/${encodeURIComponent(d.document_id)}`)),
      el("td", d.partition_key),
      el("td", count(d.lines), "num lines"),
      el("td", amount(d.amount_now), "num now"),
      el("td", amount(d.amount_preview), "num preview"),
      el("td", amount(d.delta), "num delta"),
      el("td", changesText(d.changes), "changes"),
    ]);
    tr.dataset.document = d.document_id;
    return tr;
  });
  $("cp-largest-note").textContent = changed
    ? `${plural(changed, "document")} of ${count(p.documents.length)} would change` +
      (changed > LARGEST ? `: the ${LARGEST} largest by |delta| are shown.` : ".")
    : `None of the ${plural(p.documents.length, "document")} would change.`;
  return rows;
}

function renderPreview(p) {
  $("cp-summary").textContent =
    `Settled under the pasted body as version ${p.version} of ${p.kind} / ${p.partition_key}, in ${p.currency}: ` +
    `${plural(p.documents.length, "document")}, ${plural(p.outcomes.lines, "line")}.`;
  fill($("cp-totals").tBodies[0], totalsRows(p));
  fill($("cp-changes").tBodies[0], changeRows(p));
  $("cp-outcomes").replaceChildren(...outcomeCards(p));
  fill($("cp-largest").tBodies[0], largestRows(p));
  const missing = p.not_stored.length;
  $("cp-not-stored").dataset.count = String(missing);
  $("cp-not-stored").textContent = missing
    ? `${plural(missing, "document")} not stored (retention): not previewed, never guessed.`
    : "Every selected document's lines are stored.";
  $("cp-not-stored-ids").hidden = !missing;
  $("cp-not-stored-list").textContent = p.not_stored.join("\n");
  $("cp-digest").textContent = p.digest;
  $("cp-result").hidden = false;
}

async function preview(event) {
  event.preventDefault();
  const wanted = contractInHash();
  if (!wanted) return;
  clearPreview();
  const text = $("cp-body").value;
  try {
    const parsed = JSON.parse(text);
    if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) throw new Error("a contract is a JSON object");
  } catch (error) {
    return showRefusal("not_json", `The body is not a JSON object (${error.message}); nothing was sent.`);
  }
  const by = $("cp-by").value;
  const value = $("cp-select").value.trim();
  if (!value) return showRefusal("no_selection", by === "period" ? "Name a period." : "Give at least one id.");
  const select = { [by]: by === "period" ? value : idsIn(value) };
  $("cp-run").disabled = true;
  say("cp", "Previewing…");
  try {
    const answer = await api(`${contractPath(wanted)}/preview`, {
      method: "POST",
      json: `{"contract": ${text}, "select": ${JSON.stringify(select)}}`,
      asOperator: true,
    });
    if (keyOf(contractInHash() || {}) !== keyOf(wanted)) return;
    renderPreview(answer);
    say("cp", "Previewed: nothing was published, no ledger row written.");
  } catch (error) {
    say("cp", "");
    if (error instanceof Refused) showRefusal(error.code, error.reason ?? error.message, error.details);
    else if (error instanceof Forbidden || error instanceof Unauthorized) {
      // A wrong operator token is forgotten and asked for again; a signed-in
      // token no longer valid signs out, as on every other page.
      if (error instanceof Unauthorized && !hasOperatorToken()) return onSignOut("The token is no longer valid.");
      clearOperatorToken();
      $("contract-operator").hidden = false;
      showRefusal("forbidden", "A preview needs an operator token.");
    } else showRefusal(null, error.message);
  } finally {
    $("cp-run").disabled = false;
  }
}

// Signed out: the next sign-in draws its contract afresh, nothing pasted kept.
export function forgetContracts() {
  drawn = null;
}

export function wireContracts(signOut) {
  onSignOut = signOut;
  $("contracts-filters").addEventListener("submit", (event) => {
    event.preventDefault();
    showContracts();
  });
  operatorTokenForm($("contracts-operator"), showContracts);
  operatorTokenForm($("contract-operator"), showContract);
  $("cp-form").addEventListener("submit", preview);
  $("cp-reset").addEventListener("click", () => {
    $("cp-body").value = $("cp-body").dataset.newest || "";
  });
  $("cp-by").addEventListener("change", () => {
    $("cp-select").placeholder = $("cp-by").value === "period" ? "period name" : "ids, separated by spaces or commas";
  });
}
