// One way to show numbers and dates everywhere on the page.
// Money arrives as decimal strings and stays strings: it is rounded (half up,
// at the kind's quantum) and grouped digit by digit with BigInt, never as a float.

// Each kind's places, from GET /v1/kinds (setKinds, once signed in): the page
// names no kind itself. A kind not (yet) known shows the places it was sent with.
export const QUANTUM_PLACES = {};
// The kinds whose amounts are no money totals (a recipe's unit costs).
export const NOT_TOTALS = new Set();
export function setKinds(kinds) {
  for (const kind of kinds) {
    QUANTUM_PLACES[kind.name] = kind.places;
    if (kind.amounts_are_totals === false) NOT_TOTALS.add(kind.name);
  }
}

function parse(value) {
  const match = /^([-+]?)(\d*)(?:\.(\d*))?$/.exec(String(value).trim());
  if (!match || (match[2] === "" && !match[3])) return null;
  const fraction = match[3] || "";
  return { negative: match[1] === "-", units: BigInt((match[2] || "0") + fraction), scale: fraction.length };
}

function rescale(units, from, to) {
  if (to >= from) return units * 10n ** BigInt(to - from);
  const divisor = 10n ** BigInt(from - to);
  return (units + divisor / 2n) / divisor; // half up, on the magnitude: away from zero
}

const group = (whole) => whole.replace(/\B(?=(\d{3})+(?!\d))/g, ",");

function render(negative, units, scale) {
  const digits = units.toString().padStart(scale + 1, "0");
  const whole = group(scale ? digits.slice(0, -scale) : digits);
  const text = scale ? `${whole}.${digits.slice(-scale)}` : whole;
  return negative && units !== 0n ? `-${text}` : text;
}

// A decimal string with thousands separators, at `places` (or as many as sent).
export function decimal(value, places) {
  if (value === null || value === undefined) return "";
  const parsed = parse(value);
  if (!parsed) return String(value);
  const scale = places ?? parsed.scale;
  return render(parsed.negative, rescale(parsed.units, parsed.scale, scale), scale);
}

// Money at its kind's quantum (GET /v1/kinds' places).
export const money = (value, kind) => decimal(value, QUANTUM_PLACES[kind]);

// A sum over several kinds: at the finest of their quanta, so that no kind's
// digits are cut (0.01 and 0.0001: four places); one kind: its own.
export function moneyOfKinds(value, kinds) {
  const places = [...kinds].map((kind) => QUANTUM_PLACES[kind]).filter((n) => n !== undefined);
  return decimal(value, places.length ? Math.max(...places) : undefined);
}

// Several decimal strings added exactly (as scaled integers), as a string.
export function decimalSum(values) {
  const parsed = values.map(parse).filter(Boolean);
  const scale = Math.max(0, ...parsed.map((p) => p.scale));
  let total = 0n;
  for (const p of parsed) total += (p.negative ? -1n : 1n) * rescale(p.units, p.scale, scale);
  return render(total < 0n, total < 0n ? -total : total, scale).replaceAll(",", "");
}

export const count = (n) => (n === null || n === undefined ? "" : decimal(String(Math.round(n))));

export const rate = (n) => (n < 10 ? decimal(n.toFixed(1)) : count(n));

const pad = (n) => String(n).padStart(2, "0");

export function zone(date = new Date()) {
  const part = new Intl.DateTimeFormat(undefined, { timeZoneName: "short" })
    .formatToParts(date)
    .find((p) => p.type === "timeZoneName");
  return part ? part.value : "UTC";
}

// "2026-12-01 12:46:08 UTC": local time, always with its zone.
export function when(iso) {
  if (!iso) return "";
  const d = new Date(iso);
  const day = `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}`;
  return `${day} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())} ${zone(d)}`;
}

// "12:46" (or "12:46:08", or "12:46:08.4"), for axis ticks whose zone the axis title names.
export function clock(ms, seconds = false, tenths = false) {
  const d = new Date(ms);
  const hm = `${pad(d.getHours())}:${pad(d.getMinutes())}`;
  if (!seconds) return hm;
  const s = `${hm}:${pad(d.getSeconds())}`;
  return tenths ? `${s}.${Math.floor(d.getMilliseconds() / 100)}` : s;
}

export function ago(seconds) {
  if (seconds === null || seconds === undefined) return "unknown";
  if (seconds < 1) return "0 s";
  if (seconds < 120) return `${Math.round(seconds)} s`;
  if (seconds < 7200) return `${Math.round(seconds / 60)} min`;
  if (seconds < 172800) return `${(seconds / 3600).toFixed(1)} h`;
  return `${(seconds / 86400).toFixed(1)} days`;
}
