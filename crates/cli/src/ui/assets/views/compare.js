// `#/compare/<id>,<id>,...`: the compare verb as a grid, rows the paths any attempt
// changed, columns the attempts; a cell's colour and letter name its group (attempts
// that agree on the path share one). Each attempt's checks and a link to its diff;
// combine the chosen attempts.

import { call } from "../api.js";
import { confirmAction, notice, noticeError } from "../dialog.js";
import { checkBadge, href, html, plusMinus, shortId, snapshotLink } from "../dom.js";

export const viewName = () => "compare";
export const title = ({ ids }) => `compare ${ids.length} attempts`;

const LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ";
const COLOURS = 8;

function groupName(index) {
  return index < LETTERS.length ? LETTERS[index] : String(index + 1);
}

function attempt(s, base) {
  return html`<th scope="col" class="attempt" data-test="compare-attempt" data-snapshot="${s.id}"
      data-files="${s.files}" data-insertions="${s.insertions}" data-deletions="${s.deletions}">
    <label class="choose"><input type="checkbox" data-test="attempt-select" data-snapshot="${s.id}">
      <span class="id">${shortId(s.id)}</span></label>
    <a class="small-link" data-test="attempt-diff" href="${href("diff", base, s.id)}">diff</a>
    <div class="stat">${s.files} file${s.files === 1 ? "" : "s"} ${plusMinus(s.insertions, s.deletions)}</div>
    <div class="checks">${
      s.checks.length
        ? latest(s.checks).map((c) => checkBadge(s.id, c, "attempt-check"))
        : html`<span class="muted">no checks</span>`
    }</div>
  </th>`;
}

/** The newest run of each check (the verb lists every run, newest first). */
function latest(checks) {
  const seen = new Set();
  return checks.filter((c) => !seen.has(c.check) && seen.add(c.check));
}

/** How each snapshot stands at path `p`: its group's index in `p.groups`, its state, and
 * the letter naming its content (the changed groups lettered A, B, ... in order). */
function standing(p) {
  const out = new Map();
  let letter = 0;
  p.groups.forEach((g, index) => {
    const state = g.some((id) => p.unchanged.includes(id))
      ? "unchanged"
      : g.some((id) => p.deleted.includes(id))
        ? "deleted"
        : "changed";
    const name = state === "changed" ? groupName(letter++) : null;
    for (const id of g) out.set(id, { index, state, name, colour: name ? letter - 1 : null });
  });
  return out;
}

function cell(p, s, at) {
  const { index, state, name, colour } = at.get(s.id);
  const label = state === "unchanged" ? "=" : state === "deleted" ? "✕" : name;
  const what =
    state === "unchanged" ? "as the base has it" : state === "deleted" ? "deleted" : `version ${name}`;
  const content =
    state === "deleted"
      ? html`<span>${label}</span>`
      : html`<a href="${href("file", s.id, ...p.path.split("/"))}">${label}</a>`;
  return html`<td class="gcell ${state}${colour === null ? "" : ` g${colour % COLOURS}`}" data-test="compare-cell"
    data-path="${p.path}" data-snapshot="${s.id}" data-group="${index}" data-state="${state}"
    title="${shortId(s.id)}: ${what}">${content}</td>`;
}

function pathRow(p, snaps) {
  const at = standing(p);
  return html`<tr data-test="compare-row" data-path="${p.path}"><th scope="row" class="path">${p.path}</th>${snaps.map((s) => cell(p, s, at))}</tr>`;
}

export async function render(view) {
  const outcome = await view.data;
  if (!view.current()) return;
  const snaps = outcome.snapshots;
  view.main.innerHTML = String(html`<h1>Compare ${snaps.length} attempts</h1>
    <p class="meta">Against their base ${snapshotLink(outcome.base)}.
      Cells with the same letter and colour hold the same content; = is the base's, ✕ deleted.</p>
    ${outcome.identical.map(
      (g) => html`<p class="note" data-test="compare-identical" data-snapshots="${g.join(",")}">
        Identical trees: ${g.map((id) => shortId(id)).join(", ")}</p>`,
    )}
    <div class="actions">
      <button type="button" data-test="action-combine">Combine…</button>
      <span class="hint">The checked attempts; with none checked, all of them.</span>
    </div>
    <div class="grid-wrap"><table class="grid">
      <thead><tr><th scope="col" class="corner">Path</th>${snaps.map((s) => attempt(s, outcome.base))}</tr></thead>
      <tbody>${outcome.paths.map((p) => pathRow(p, snaps))}</tbody>
    </table></div>
    ${outcome.paths.length === 0 ? html`<p class="empty">No attempt changed anything against the base.</p>` : ""}`);
  view.main.querySelector("[data-test=action-combine]").onclick = () => combine(view, snaps);
  view.done();
}

async function combine(view, snaps) {
  const checked = [...view.main.querySelectorAll("[data-test=attempt-select]:checked")].map(
    (c) => c.dataset.snapshot,
  );
  const chosen = checked.length ? checked : snaps.map((s) => s.id);
  if (chosen.length < 2) {
    noticeError({ code: "usage", message: "Choose two or more attempts to combine." }, "combine");
    return;
  }
  const form = await confirmAction({
    action: "combine",
    title: "Combine attempts",
    body: html`<p>Merge the changes of ${chosen.map((id, i) => html`${i ? ", " : ""}<code>${shortId(id)}</code>`)}
      into one new snapshot? No worktree or repository changes; with a conflict nothing is recorded.</p>`,
    fields: html`<label class="field">Message <span class="muted">(optional)</span>
      <input name="message" data-test="combine-message"></label>`,
    ok: "Combine",
  });
  if (!form) return;
  const args = { snapshots: chosen };
  const message = form.get("message").trim();
  if (message) args.message = message;
  try {
    const done = await call("combine", args);
    const item = notice({
      action: "combine",
      message: html`Combined into ${snapshotLink(done.snapshot, { test: "combined-link", className: null })}.`,
    });
    item.querySelector("[data-test=combined-link]").addEventListener("click", () => item.remove());
  } catch (e) {
    noticeError(e, "combine");
  }
}
