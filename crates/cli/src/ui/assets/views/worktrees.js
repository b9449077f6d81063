// `#/`: the worktrees and mounts the store knows (worktree_list), with their heads and
// live state.

import { bytes, href, html, snapshotLink } from "../dom.js";

export const viewName = () => "worktrees";
export const title = () => "worktrees";

function state(w) {
  if (w.kind !== "mounted") return html`<span class="muted">—</span>`;
  const parts = [
    w.live
      ? html`<span class="badge ok">mounted</span>`
      : html`<span class="badge off">not mounted</span>`,
  ];
  if (w.read_only) parts.push(html` <span class="badge">read-only</span>`);
  if (w.remote) parts.push(html` <span class="badge">from ${w.remote}</span>`);
  const p = w.prefetch;
  if (p) {
    parts.push(
      p.ended
        ? html` <span class="muted">prefetch ended (${p.objects_done}/${p.objects_total})</span>`
        : html` <span class="muted">prefetching ${bytes(p.bytes_done)} of ${bytes(p.bytes_total)}</span>`,
    );
  }
  return parts;
}

function row(w) {
  const live = w.kind === "mounted" ? String(Boolean(w.live)) : null;
  return html`<tr data-test="worktree-row" data-path="${w.path}" data-kind="${w.kind}"
      data-head="${w.head ?? ""}"${live === null ? "" : html` data-live="${live}"`}>
    <td class="path"><a data-test="worktree-link" href="${href("worktree", w.path)}">${w.path}</a></td>
    <td>${w.kind}</td>
    <td>${snapshotLink(w.head)}</td>
    <td>${state(w)}</td>
  </tr>`;
}

export async function render(view) {
  const { worktrees } = await view.data;
  if (!view.current()) return;
  const sorted = [...worktrees].sort((a, b) => a.path.localeCompare(b.path));
  view.main.innerHTML = String(html`<h1>Worktrees</h1>
    ${
      sorted.length === 0
        ? html`<p class="empty">No worktrees yet: <code>cairn checkout</code>,
            <code>cairn mount</code> or <code>cairn onboard</code> make one.</p>`
        : html`<table class="list">
            <thead><tr><th scope="col">Path</th><th scope="col">Kind</th>
              <th scope="col">Head</th><th scope="col">State</th></tr></thead>
            <tbody>${sorted.map(row)}</tbody></table>`
    }`);
  view.done();
}
