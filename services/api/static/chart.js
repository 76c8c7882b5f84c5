// Line charts in SVG with labelled axes: ticks and titles on both, drawn in the
// element's own pixels so text is never stretched.
import { svg } from "./dom.js";
import { clock, count, decimal, rate, zone } from "./format.js";

const HEIGHT = 220;
const [LEFT, RIGHT, TOP, BOTTOM] = [64, 16, 14, 42];

function niceMax(value) {
  if (value <= 1) return 1;
  const step = 10 ** Math.floor(Math.log10(value));
  return [1, 2, 2.5, 5, 10].map((m) => m * step).find((m) => m >= value);
}

// series: { xs (ms), ys, xMin, xMax, yTitle, step?, markers?: [{ x, label }], current?: index }
export function drawChart(chart, series) {
  const width = Math.max(320, Math.round(chart.getBoundingClientRect().width)) || 800;
  chart.setAttribute("viewBox", `0 0 ${width} ${HEIGHT}`);
  const { xs, ys, xMin, xMax } = series;
  const yMax = niceMax(Math.max(0, ...ys));
  const base = HEIGHT - BOTTOM;
  const x = (t) => LEFT + ((t - xMin) / Math.max(1, xMax - xMin)) * (width - LEFT - RIGHT);
  const y = (v) => base - (v / yMax) * (base - TOP);
  const label = (v) => (yMax < 10 ? decimal(v.toFixed(1)) : count(v));
  const nodes = [];
  for (const v of [0, yMax / 2, yMax]) {
    nodes.push(svg("line", { x1: LEFT, y1: y(v), x2: width - RIGHT, y2: y(v), class: "grid" }));
    nodes.push(svg("text", { x: LEFT - 6, y: y(v) + 4, "text-anchor": "end", class: "tick" }, label(v)));
  }
  const span = xMax - xMin;
  // A job of a few seconds has ticks under a second apart: tenths, and never
  // the same label twice.
  let shown = null;
  for (let i = 0; i <= 4; i += 1) {
    const t = xMin + (span * i) / 4;
    const anchor = i === 0 ? "start" : i === 4 ? "end" : "middle";
    const text = clock(t, span < 600000, span < 10000);
    if (text === shown) continue;
    shown = text;
    nodes.push(svg("text", { x: x(t), y: base + 16, "text-anchor": anchor, class: "tick" }, text));
  }
  nodes.push(
    svg("line", { x1: LEFT, y1: base, x2: width - RIGHT, y2: base, class: "axis" }),
    svg("line", { x1: LEFT, y1: TOP, x2: LEFT, y2: base, class: "axis" }),
    svg("text", { x: (LEFT + width - RIGHT) / 2, y: HEIGHT - 6, "text-anchor": "middle", class: "title x-title" },
      `time (${zone()})`),
    svg("text", { x: 14, y: (TOP + base) / 2, "text-anchor": "middle", class: "title y-title",
      transform: `rotate(-90 14 ${(TOP + base) / 2})` }, series.yTitle),
  );
  const points = [];
  xs.forEach((t, i) => {
    if (series.step && i > 0) points.push(`${x(t).toFixed(1)},${y(ys[i - 1]).toFixed(1)}`);
    points.push(`${x(t).toFixed(1)},${y(ys[i]).toFixed(1)}`);
  });
  if (points.length) {
    const last = points[points.length - 1].split(",")[0];
    nodes.push(svg("polygon", { points: `${x(xs[0])},${base} ${points.join(" ")} ${last},${base}`, class: "area" }));
    nodes.push(svg("polyline", { points: points.join(" "), class: "line" }));
  }
  for (const marker of series.markers || []) {
    nodes.push(svg("line", { x1: x(marker.x), y1: TOP, x2: x(marker.x), y2: base, class: "marker" }));
    const right = x(marker.x) > width / 2; // a label near the right edge reads leftwards
    nodes.push(svg("text", { x: x(marker.x) + (right ? -3 : 3), y: TOP + 10,
      "text-anchor": right ? "end" : "start", class: "tick marker-label" }, marker.label));
  }
  if (series.current !== undefined && xs.length) {
    const i = series.current;
    const dot = svg("circle", { cx: x(xs[i]), cy: y(ys[i]), r: 3.5, class: "now" });
    dot.appendChild(svg("title", {}, `${rate(ys[i])} lines/s`));
    nodes.push(dot);
  }
  chart.replaceChildren(...nodes);
}

// The throughput chart: one point per bucket (its start), the latest full
// bucket (the one "lines/s now" shows) marked.
export function drawThroughput(chart, throughput, windowS) {
  const since = Date.parse(throughput.since);
  const step = throughput.bucket_s * 1000;
  const ys = throughput.lines_per_s;
  drawChart(chart, {
    xs: ys.map((_, i) => since + i * step),
    ys,
    xMin: since,
    xMax: since + windowS * 1000,
    yTitle: "lines/s",
    current: Math.max(0, ys.length - 2),
  });
}
