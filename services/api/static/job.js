// A job's page (#jobs/<id>): its timeline, outcomes per partition, and its
// lines with an outcome filter and a CSV of them.
import { api, download } from "./api.js";
import { drawChart } from "./chart.js";
import { $, cell, el, fill, link, row } from "./dom.js";
import { count, money, when } from "./format.js";

const LINES_PAGE = 100;
// What the producer sent (jobs' source_format).
const SOURCE_FORMATS = { json: "JSON", ndjson: "NDJSON", x12: "X12 (EDI)" };
let shown = { jobId: null, kind: null, cursor: null };

// A completed job whose lines were all or partly dead-lettered is not shown as
// a clean success: its state says how many lines failed.
export function jobState(job) {
  const dead = job.outcomes.dead_lettered || 0;
  if (job.state !== "completed" || !dead) return { text: job.state, className: `state-${job.state}` };
  if (dead >= job.lines) return { text: "completed: every line dead-lettered", className: "state-failed" };
  const lines = dead === 1 ? "line" : "lines";
  return { text: `completed, ${count(dead)} ${lines} dead-lettered`, className: "state-partial" };
}

export const jobIdInHash = () => {
  const match = location.hash.match(/^#jobs\/([^/?]+)$/);
  return match ? decodeURIComponent(match[1]) : null;
};

function facts(job, timeline) {
  const items = [
    ["state", jobState(job).text],
    ["kind", job.kind],
    ["source", SOURCE_FORMATS[job.source_format] || job.source_format],
    ["accepted", when(timeline.accepted_at)],
    ["completed", timeline.completed_at ? when(timeline.completed_at) : "not yet"],
    ["lines", count(job.lines)],
    ["chunks done", `${count(job.chunks.done)} of ${count(job.chunks.total)}`],
    ["posted", `${count(job.outcomes.posted)} (${money(job.amounts.posted, job.kind)})`],
    ["disputed", `${count(job.outcomes.disputed)} (claimed ${money(job.amounts.disputed, job.kind)})`],
    ["duplicate", count(job.outcomes.duplicate)],
    ["dead-lettered", count(job.outcomes.dead_lettered)],
  ];
  $("job-facts").replaceChildren(
    ...items.map(([label, value]) => {
      const card = el("div", null, "card");
      card.append(el("span", label, "label"), el("span", value, "value small"));
      card.dataset.fact = label;
      return card;
    }),
  );
}

function drawTimeline(timeline) {
  const start = Date.parse(timeline.accepted_at);
  const end = timeline.completed_at ? Date.parse(timeline.completed_at) : Date.now();
  const points = timeline.chunks.map((c) => [Date.parse(c.at), c.lines_done]);
  const markers = [{ x: start, label: "accepted" }];
  if (timeline.completed_at) markers.push({ x: end, label: "completed" });
  drawChart($("job-timeline"), {
    xs: [start, ...points.map((p) => p[0])],
    ys: [0, ...points.map((p) => p[1])],
    xMin: start,
    xMax: Math.max(end, start + 1000),
    yTitle: "lines done",
    step: true,
    markers,
  });
}

function renderPartitions(timeline) {
  const rows = timeline.partitions.map((p) => {
    const tr = row([
      el("td", p.partition_key),
      el("td", count(p.posted), "num"),
      el("td", count(p.disputed), "num"),
      el("td", count(p.dead_lettered), "num"),
      el("td", money(p.amount_posted, timeline.kind), "num"),
      el("td", money(p.amount_disputed, timeline.kind), "num"),
    ]);
    tr.dataset.partition = p.partition_key;
    return tr;
  });
  if (!rows.length) rows.push(row([el("td", "no settled lines yet", "muted")]));
  fill($("job-partitions").tBodies[0], rows);
}

function lineRow(line, kind) {
  const tr = row([
    el("td", line.document_id),
    el("td", line.line_ref),
    el("td", line.outcome, `outcome outcome-${line.outcome}`),
    el("td", line.reason || ""),
    el("td", money(line.amount, kind), "num"),
    el("td", money(line.claimed_amount, kind), "num"),
    el("td", money(line.delta, kind), "num"),
    el("td", line.dispute_status || ""),
    // An X12 set's control numbers (x12:<sender>:<ISA13>:<GS06>:<ST02>), else the producer's.
    el("td", line.correlation_id || "", "muted"),
  ]);
  tr.dataset.outcome = line.outcome;
  return tr;
}

async function loadLines(append) {
  const outcome = $("job-outcome").value;
  const query = new URLSearchParams({ limit: String(LINES_PAGE) });
  if (outcome) query.set("outcome", outcome);
  if (append && shown.cursor) query.set("cursor", shown.cursor);
  const page = await api(`/v1/jobs/${encodeURIComponent(shown.jobId)}/lines?${query}`);
  const rows = page.items.map((line) => lineRow(line, shown.kind));
  const tbody = $("job-lines").tBodies[0];
  if (append) tbody.append(...rows);
  else fill(tbody, rows.length ? rows : [row([el("td", "no lines", "muted")])]);
  shown.cursor = page.next_cursor;
  $("job-more").hidden = !page.next_cursor;
}

// A job with dead-lettered lines names why, each reason linking to its letters:
// the counts are the server's (the timeline's), however many lines there are.
function deadReasons(job, timeline) {
  const box = $("job-dead");
  box.hidden = !job.outcomes.dead_lettered;
  if (box.hidden) return;
  const parts = [`${jobState(job).text}:`];
  for (const { reason, lines } of timeline.dead_letters) {
    parts.push(" ", link(reason || "unknown", `#dead-letters/${encodeURIComponent(reason || "")}`), ` (${count(lines)})`);
  }
  box.replaceChildren(...parts);
}

export async function showJob() {
  const jobId = jobIdInHash();
  $("job").hidden = !jobId;
  if (!jobId) return;
  $("job-id").textContent = jobId;
  $("job-error").textContent = "";
  try {
    const path = `/v1/jobs/${encodeURIComponent(jobId)}`;
    const [job, timeline] = await Promise.all([api(path), api(`${path}/timeline`)]);
    if (shown.jobId !== jobId) $("job-outcome").value = "";
    shown = { jobId, kind: job.kind, cursor: null };
    $("job-997").hidden = job.source_format !== "x12";
    facts(job, timeline);
    deadReasons(job, timeline);
    drawTimeline(timeline);
    renderPartitions(timeline);
    await loadLines(false);
    $("job").scrollIntoView();
  } catch (error) {
    $("job-error").textContent = `Could not load job: ${error.message}`;
  }
}

async function saveCsv() {
  const outcome = $("job-outcome").value;
  const query = outcome ? `?outcome=${encodeURIComponent(outcome)}` : "";
  const name = `job-${shown.jobId}${outcome ? `-${outcome}` : ""}.csv`;
  try {
    await download(`/v1/jobs/${encodeURIComponent(shown.jobId)}/lines.csv${query}`, name);
  } catch (error) {
    $("job-error").textContent = `Could not export lines: ${error.message}`;
  }
}

// An X12 job's 997 functional acknowledgement, as its partner is sent it.
async function save997() {
  const path = `/v1/jobs/${encodeURIComponent(shown.jobId)}/acknowledgement`;
  try {
    await download(path, `job-${shown.jobId}-997.edi`, "application/edi-x12");
  } catch (error) {
    $("job-error").textContent = `Could not fetch the 997: ${error.message}`;
  }
}

export function wireJobPage() {
  $("job-outcome").addEventListener("change", () => loadLines(false));
  $("job-more").addEventListener("click", () => loadLines(true));
  $("job-csv").addEventListener("click", saveCsv);
  $("job-997").addEventListener("click", save997);
}

export function jobLink(jobId) {
  const a = el("a");
  a.appendChild(el("code", jobId));
  a.href = `#jobs/${encodeURIComponent(jobId)}`;
  return cell(a);
}
