// Small helpers: HTML built as escaped strings (fast for thousands of rows), and the
// formats every view shares.

const ESCAPES = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };

/** Text made safe for HTML content and attribute values. */
export function esc(value) {
  const text = String(value ?? "");
  return /[&<>"']/.test(text) ? text.replace(/[&<>"']/g, (c) => ESCAPES[c]) : text;
}

/** Already-safe HTML, passed through `html` as it is. */
export class Raw {
  constructor(text) {
    this.text = text;
  }
  toString() {
    return this.text;
  }
}

export const raw = (text) => new Raw(text);

function part(value) {
  if (value instanceof Raw) return value.text;
  if (Array.isArray(value)) return value.map(part).join("");
  if (value === null || value === undefined || value === false) return "";
  return esc(value);
}

/** Tagged template: interpolated values are escaped, arrays joined, `raw` kept. */
export function html(strings, ...values) {
  let out = strings[0];
  for (let i = 0; i < values.length; i++) out += part(values[i]) + strings[i + 1];
  return new Raw(out);
}

/** An attribute written only when its value is not null/undefined. */
export function attr(name, value) {
  return value === null || value === undefined ? raw("") : raw(` ${name}="${esc(value)}"`);
}

export function shortId(id) {
  return id ? String(id).slice(0, 12) : "";
}

const UNITS = ["B", "KiB", "MiB", "GiB", "TiB"];

export function bytes(n) {
  let value = Number(n) || 0;
  let unit = 0;
  while (value >= 1024 && unit < UNITS.length - 1) {
    value /= 1024;
    unit++;
  }
  return `${unit === 0 ? value : value.toFixed(1)} ${UNITS[unit]}`;
}

const AGE_STEPS = [
  [60, "s", 1],
  [3600, "min", 60],
  [86400, "h", 3600],
  [86400 * 30, "d", 86400],
  [86400 * 365, "mo", 86400 * 30],
  [Infinity, "y", 86400 * 365],
];

/** "5 min ago" for an RFC 3339 time. */
export function age(created, now = Date.now()) {
  const then = Date.parse(created);
  if (Number.isNaN(then)) return "";
  const seconds = Math.max(0, Math.round((now - then) / 1000));
  for (const [limit, unit, size] of AGE_STEPS) {
    if (seconds < limit) return `${Math.floor(seconds / size)} ${unit} ago`;
  }
  return "";
}

/** `+N -M` with its parts marked for colour. */
export function plusMinus(insertions, deletions) {
  return html`<span class="n-ins">+${insertions}</span> <span class="n-del">-${deletions}</span>`;
}

/** The hash link of a route, each part URL-encoded. */
export function href(...parts) {
  return "#/" + parts.map((p) => encodeURIComponent(p)).join("/");
}

/** A snapshot's link (its short id) to its page; a muted "none" without one. `test`: its
 * data-test name; `className`: its class (null for none). */
export function snapshotLink(id, { test = null, className = "id" } = {}) {
  if (!id) return html`<span class="muted">none</span>`;
  return html`<a${attr("class", className)}${attr("data-test", test)} href="${href("snapshot", id)}">${shortId(id)}</a>`;
}

/** A check's newest run (a `CheckMark`) of a snapshot, as a link to its output: ✓ or ✗
 * and its name. `test`: its data-test name. */
export function checkBadge(snapshot, mark, test = null) {
  const result = mark.passed ? "passed" : "failed";
  return html`<a class="check ${mark.passed ? "pass" : "fail"}"${attr("data-test", test)}
    data-check="${mark.check}" data-passed="${String(mark.passed)}"
    href="${href("checks", snapshot, mark.check)}"
    title="${mark.check} ${result}">${mark.passed ? "✓" : "✗"} ${mark.check}</a>`;
}

/** Every change of a diff outcome (diff, review), in byte order of path, as git prints. */
export function changesOf(outcome) {
  const all = [
    ...(outcome.added ?? []),
    ...(outcome.removed ?? []),
    ...(outcome.modified ?? []),
    ...(outcome.renamed ?? []),
  ];
  const encoder = new TextEncoder();
  const key = new Map(all.map((c) => [c, encoder.encode(c.path)]));
  return all.sort((a, b) => compareBytes(key.get(a), key.get(b)));
}

function compareBytes(a, b) {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return a[i] - b[i];
  return a.length - b.length;
}

/** Base64 to bytes. */
export function fromBase64(text) {
  const binary = atob(text ?? "");
  const out = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) out[i] = binary.charCodeAt(i);
  return out;
}

/** Git's rule: a NUL byte in the first 8000 bytes makes content binary. */
export function isBinary(data) {
  const n = Math.min(data.length, 8000);
  for (let i = 0; i < n; i++) if (data[i] === 0) return true;
  return false;
}

function checkKey(box) {
  const d = box.dataset;
  return `${d.test}|${d.snapshot ?? ""}|${d.path ?? ""}|${d.check ?? ""}`;
}

/** The checkboxes checked under `root`, by what they stand for (a re-render keeps them). */
export function checkedKeys(root) {
  return new Set([...root.querySelectorAll("input[type=checkbox]:checked")].map(checkKey));
}

/** Checks again under `root` the boxes `keys` names; whether any was. */
export function restoreChecked(root, keys) {
  let any = false;
  for (const box of root.querySelectorAll("input[type=checkbox]")) {
    if (keys.has(checkKey(box))) {
      box.checked = true;
      any = true;
    }
  }
  return any;
}
