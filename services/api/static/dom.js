// Every value from the API is inserted as text (textContent), never as HTML:
// job ids, partition keys, reasons and payloads come from producers.

const SVG_NS = "http://www.w3.org/2000/svg";

export const $ = (id) => document.getElementById(id);

export function el(tag, text, className) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = String(text);
  if (className) node.className = className;
  return node;
}

export function row(cells) {
  const tr = document.createElement("tr");
  for (const cell of cells) tr.appendChild(cell);
  return tr;
}

export const fill = (tbody, rows) => tbody.replaceChildren(...rows);

export function svg(tag, attributes, text) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, value);
  if (text !== undefined) node.textContent = text;
  return node;
}

export function link(text, href) {
  const a = el("a", text);
  a.href = href;
  return a;
}

// A table wider than its scrolling box: the box is marked (a shadow at its
// right edge) and its hint shown, since a scrollbar may be hidden (an overlay).
export function markOverflow(box, hint) {
  const over = box.scrollWidth > box.clientWidth + 1;
  box.classList.toggle("overflowing", over);
  if (hint) hint.hidden = !over;
}

export function cell(child, className) {
  const td = el("td", null, className);
  td.appendChild(child);
  return td;
}
