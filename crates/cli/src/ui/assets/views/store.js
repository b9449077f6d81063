// `#/store`: how much the store takes, and what `gc --dry-run` would free (and what
// keeps the rest).

import { bytes, html, snapshotLink } from "../dom.js";

export const viewName = () => "store";
export const title = () => "store";

function kinds(removed) {
  const count = new Map();
  for (const r of removed) count.set(r.kind, (count.get(r.kind) ?? 0) + 1);
  return [...count].map(([kind, n]) => `${n} ${kind}${n === 1 ? "" : "s"}`).join(", ");
}

export async function render(view) {
  const gc = await view.data;
  if (!view.current()) return;
  view.main.innerHTML = String(html`<h1>Store</h1>
    <dl class="facts big">
      <dt>Store folder</dt><dd data-test="store-bytes" data-bytes="${gc.store_bytes}">${bytes(gc.store_bytes)}</dd>
      <dt>Database file</dt><dd data-test="store-file-bytes" data-bytes="${gc.file_bytes_before}">${bytes(gc.file_bytes_before)}</dd>
      <dt><code>cairn gc</code> would free</dt><dd data-test="gc-freed" data-bytes="${gc.bytes_freed}">${bytes(gc.bytes_freed)}
        <span class="muted" data-test="gc-removed" data-count="${gc.removed.length}">(${gc.removed.length ? kinds(gc.removed) : "nothing to remove"})</span></dd>
    </dl>
    <h2>What keeps the rest</h2>
    ${
      gc.retained.length
        ? html`<table class="list"><thead><tr><th scope="col">Kept by</th><th scope="col">Name</th>
            <th scope="col">Worktree</th><th scope="col">Snapshot</th><th scope="col" class="num-col">Bytes</th></tr></thead>
            <tbody>${gc.retained.map(
              (r) => html`<tr data-test="gc-retained-row" data-reason="${r.reason}" data-bytes="${r.bytes}">
                <td>${r.reason}</td><td>${r.name ?? ""}</td><td>${r.worktree ?? ""}</td>
                <td>${snapshotLink(r.snapshot)}</td>
                <td class="num-col">${bytes(r.bytes)}</td></tr>`,
            )}</tbody></table>`
        : html`<p class="muted">Nothing is kept.</p>`
    }
    <p class="hint">A dry run: nothing was removed. <code>cairn gc</code> removes it.</p>`);
  view.done();
}
