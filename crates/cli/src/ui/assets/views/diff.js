// `#/snapshot/<id>` (a snapshot's changes against its first parent, its facts, merge)
// and `#/diff/<a>/<b>` (any two): the diff verb's files with their hunks, unified or
// side by side, highlighted as they scroll into view.

import { call } from "../api.js";
import { confirmAction, notice, noticeError } from "../dialog.js";
import {
  age,
  bytes,
  changesOf,
  checkBadge,
  esc,
  href,
  html,
  plusMinus,
  shortId,
  snapshotLink,
} from "../dom.js";
import { snapshotEntry } from "../routes.js";

const MODE_KEY = "cairn-diff-mode";

function mode() {
  return localStorage.getItem(MODE_KEY) === "split" ? "split" : "unified";
}

/** A patch (`@@` hunks as `cairn diff -p` prints them) as hunks of numbered lines. */
export function parsePatch(patch) {
  const hunks = [];
  let hunk = null;
  let old = 0;
  let now = 0;
  for (const line of patch.split("\n")) {
    const header = /^@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@/.exec(line);
    if (header) {
      old = Number(header[1]);
      now = Number(header[2]);
      hunk = { header: line, lines: [] };
      hunks.push(hunk);
    } else if (!hunk || line === "") {
      continue;
    } else if (line[0] === " ") {
      hunk.lines.push({ kind: "ctx", old: old++, new: now++, text: line.slice(1) });
    } else if (line[0] === "-") {
      hunk.lines.push({ kind: "del", old: old++, new: null, text: line.slice(1) });
    } else if (line[0] === "+") {
      hunk.lines.push({ kind: "add", old: null, new: now++, text: line.slice(1) });
    } else if (line[0] === "\\") {
      const last = hunk.lines[hunk.lines.length - 1];
      if (last) last.noEol = true;
    }
  }
  return hunks;
}

// Rows are built as plain strings of two elements each (line numbers are drawn by CSS
// from the data attributes): a 1,000-file diff is tens of thousands of them.
function unifiedLine(l) {
  return `<div class="line ${l.kind}${l.noEol ? " noeol" : ""}" data-test="diff-line" data-kind="${l.kind}"${
    l.old === null ? "" : ` data-old="${l.old}"`
  }${l.new === null ? "" : ` data-new="${l.new}"`}><code>${esc(l.text)}</code></div>`;
}

function cell(side, l) {
  if (!l) return `<div class="cell empty" data-test="diff-cell" data-side="${side}" data-kind="empty"><code></code></div>`;
  const n = side === "old" ? l.old : l.new;
  return `<div class="cell ${l.kind}${l.noEol ? " noeol" : ""}" data-test="diff-cell" data-side="${side}" data-kind="${
    l.kind
  }" data-line="${n}"><code>${esc(l.text)}</code></div>`;
}

/** Side-by-side rows: context on both sides, each run of removals beside the additions
 * that follow it. */
function splitRows(lines) {
  const out = [];
  let i = 0;
  while (i < lines.length) {
    const l = lines[i];
    if (l.kind === "ctx") {
      out.push(`<div class="split-row" data-test="diff-split-row">${cell("old", l)}${cell("new", l)}</div>`);
      i++;
      continue;
    }
    const dels = [];
    const adds = [];
    while (i < lines.length && lines[i].kind === "del") dels.push(lines[i++]);
    while (i < lines.length && lines[i].kind === "add") adds.push(lines[i++]);
    for (let k = 0; k < Math.max(dels.length, adds.length); k++) {
      out.push(`<div class="split-row" data-test="diff-split-row">${cell("old", dels[k])}${cell("new", adds[k])}</div>`);
    }
  }
  return out.join("");
}

/** A file's hunks, parsed from its patch when first drawn (null without a patch). */
function hunksOf(file) {
  if (file.hunks === undefined) {
    const patch = file.change.patch;
    file.hunks = typeof patch === "string" ? parsePatch(patch) : null;
  }
  return file.hunks;
}

function body(file, how) {
  const c = file.change;
  if (c.binary) return `<p class="note">Binary file, ${esc(bytes(c.size ?? 0))}.</p>`;
  const hunks = hunksOf(file);
  if (!hunks || hunks.length === 0) {
    if (c.old_mode && c.new_mode && c.old_mode !== c.new_mode) {
      return `<p class="note">Mode ${esc(c.old_mode)} → ${esc(c.new_mode)}.</p>`;
    }
    return `<p class="note">${c.from ? "Renamed; the content is the same." : "No line changes."}</p>`;
  }
  return hunks
    .map(
      (h) =>
        `<div class="hunk" data-test="diff-hunk">${esc(h.header)}</div>${
          how === "split" ? splitRows(h.lines) : h.lines.map(unifiedLine).join("")
        }`,
    )
    .join("");
}

function fileLink(file, sides) {
  const c = file.change;
  // A removed file is shown where it was; anything else where it is now.
  const [snap, path] = c.new ? [sides.bSnap, c.to ?? c.path] : [sides.aSnap, c.from ?? c.path];
  const name = c.from ? html`<span class="from">${c.from}</span> → ${c.to ?? c.path}` : c.path;
  return snap
    ? html`<a data-test="diff-file-link" href="${href("file", snap, ...path.split("/"))}">${name}</a>`
    : html`<span data-test="diff-file-link">${name}</span>`;
}

function section(file, index, sides, how) {
  const c = file.change;
  return `<section class="file" data-test="diff-file" data-index="${index}" data-path="${esc(
    c.path,
  )}" data-status="${esc(c.status)}"${c.from ? ` data-from="${esc(c.from)}"` : ""} data-binary="${c.binary}">
    <header class="file-head"><span class="status s-${esc(c.status[0])}" title="${esc(
      c.status,
    )}">${esc(c.status[0])}</span> ${fileLink(file, sides)} <span class="stat">${plusMinus(
      c.insertions,
      c.deletions,
    )}</span></header>
    <div class="file-body ${how}">${body(file, how)}</div></section>`;
}

function modeButtons(how) {
  return html`<div class="segmented" role="group" aria-label="Diff layout" data-test="diff-mode">
    <button type="button" data-test="diff-mode-unified" data-mode="unified" aria-pressed="${String(how === "unified")}">Unified</button>
    <button type="button" data-test="diff-mode-split" data-mode="split" aria-pressed="${String(how === "split")}">Side by side</button>
  </div>`;
}

// Highlighting is loaded once a file is on screen: the first render does not wait for it.
async function highlightLines(path, lines) {
  const syntax = await import("../syntax.js");
  return syntax.highlightLines(path, lines);
}

/** Highlights a file's lines once it comes near the screen. */
async function highlight(section, file) {
  const hunks = hunksOf(file);
  if (section.dataset.highlighted || !hunks || hunks.length === 0) return;
  section.dataset.highlighted = "pending";
  const lines = hunks.flatMap((h) => h.lines);
  const path = file.change.path;
  const oldLines = lines.filter((l) => l.kind !== "add").map((l) => l.text);
  const newLines = lines.filter((l) => l.kind !== "del").map((l) => l.text);
  const [oldHtml, newHtml] = await Promise.all([
    highlightLines(file.change.from ?? path, oldLines),
    highlightLines(path, newLines),
  ]);
  if (!oldHtml || !newHtml) {
    section.dataset.highlighted = "plain";
    return;
  }
  apply(section, oldHtml, newHtml);
  section.dataset.highlighted = "true";
}

/** Puts highlighted lines in place, in the order the rows show them. */
function apply(section, oldHtml, newHtml) {
  let o = 0;
  let n = 0;
  const split = section.querySelector(".file-body.split");
  if (split) {
    for (const c of split.querySelectorAll(".cell:not(.empty) code")) {
      const side = c.parentElement.dataset.side;
      c.innerHTML = side === "old" ? oldHtml[o++] : newHtml[n++];
    }
    return;
  }
  for (const c of section.querySelectorAll(".line code")) {
    const kind = c.parentElement.dataset.kind;
    if (kind === "del") c.innerHTML = oldHtml[o++];
    else {
      c.innerHTML = newHtml[n++];
      if (kind === "ctx") o++;
    }
  }
}

/** Lines of diff put into the page at once: the first few screens before the render is
 * done, then the rest of a big diff in chunks of `CHUNK_LINES`, each in its own task. */
const FIRST_LINES = 400;
const CHUNK_LINES = 1500;

/** Lines a file's patch shows (its text's lines: hunk headers and lines), without parsing it. */
function patchLines(patch) {
  if (typeof patch !== "string") return 1;
  let n = 1;
  for (let i = patch.indexOf("\n"); i !== -1; i = patch.indexOf("\n", i + 1)) n++;
  return n;
}

/** The files from `from` on that make one chunk of about `size` lines (at least one file). */
function chunkEnd(files, from, size) {
  let lines = 0;
  let end = from;
  while (end < files.length && (end === from || lines < size)) {
    lines += files[end].lineCount;
    end++;
  }
  return end;
}

/**
 * Renders a diff outcome into `container`: stats, the layout toggle, one section per
 * file, added in chunks; `data-complete="true"` on `[data-test=diff-files]` once every
 * file is in. `sides`: the snapshots (or null for a worktree) the file links open.
 * `done()` is called when the first chunk is shown.
 */
function renderDiff(view, container, outcome, sides) {
  const files = changesOf(outcome).map((change) => ({
    change,
    hunks: undefined,
    lineCount: patchLines(change.patch),
  }));
  const s = outcome.stats;
  let how = mode();
  let drawing = 0;
  const draw = () => {
    const mine = ++drawing;
    container.innerHTML = `<div class="diff-bar"><span data-test="diff-stat" data-files="${s.files}" data-insertions="${s.insertions}" data-deletions="${s.deletions}">${s.files} file${s.files === 1 ? "" : "s"} changed, ${plusMinus(
      s.insertions,
      s.deletions,
    )}</span>${modeButtons(how)}</div>${
      outcome.message ? `<p class="note">${esc(outcome.message)}</p>` : ""
    }${
      files.length === 0 ? '<p class="empty">No changes.</p>' : ""
    }<div class="files" data-test="diff-files" data-complete="false"></div>`;
    const list = container.querySelector("[data-test=diff-files]");
    const observer = new IntersectionObserver(
      (seen) => {
        for (const entry of seen) {
          if (!entry.isIntersecting) continue;
          observer.unobserve(entry.target);
          highlight(entry.target, files[Number(entry.target.dataset.index)]);
        }
      },
      { rootMargin: "800px 0px" },
    );
    const add = (from) => {
      if (mine !== drawing || !view.current()) return;
      const end = chunkEnd(files, from, from === 0 ? FIRST_LINES : CHUNK_LINES);
      const chunk = [];
      for (let i = from; i < end; i++) chunk.push(section(files[i], i, sides, how));
      list.insertAdjacentHTML("beforeend", chunk.join(""));
      for (let el = list.children[from]; el; el = el.nextElementSibling) observer.observe(el);
      if (end < files.length) setTimeout(() => add(end), 0);
      else list.dataset.complete = "true";
    };
    add(0);
    container.querySelector("[data-test=diff-mode]").onclick = (event) => {
      const chosen = event.target.closest("button")?.dataset.mode;
      if (!chosen || chosen === how) return;
      how = chosen;
      localStorage.setItem(MODE_KEY, how);
      observer.disconnect();
      draw();
      view.done();
    };
  };
  draw();
}

// ---- #/diff/<a>/<b>

// A directory is a worktree's live files: no snapshot to open a file at, and it changes.
const isDir = (x) => x.startsWith("/");
const sideName = (x) => (isDir(x) ? x : shortId(x));

export const between = {
  viewName: () => "diff",
  title: ({ a, b }) => `diff ${sideName(a)}..${sideName(b)}`,
  async render(view) {
    const { a, b } = view.params;
    const outcome = await view.data;
    if (!view.current()) return;
    view.main.innerHTML = String(html`<h1>Changes from <code class="id">${sideName(a)}</code>
      to <code class="id">${sideName(b)}</code></h1>
      <p class="meta"><a href="${href("diff", b, a)}">Swap sides</a>${
        isDir(a) || isDir(b)
          ? html` · a worktree's live files: edits show when the store changes, or
              <button type="button" class="small" data-test="reload">Read them again</button>`
          : ""
      }</p><div data-diff></div>`);
    const reload = view.main.querySelector("[data-test=reload]");
    if (reload) reload.onclick = () => view.rerender();
    renderDiff(view, view.main.querySelector("[data-diff]"), outcome, {
      aSnap: isDir(a) ? null : a,
      bSnap: isDir(b) ? null : b,
    });
    view.done();
  },
  // Two snapshots never change; a worktree's live files do.
  async refresh(view) {
    const { a, b } = view.params;
    if (isDir(a) || isDir(b)) await view.rerender();
  },
};

// ---- #/snapshot/<id>

function facts(entry) {
  const source = entry.source;
  return html`<dl class="facts">
    <dt>Created</dt><dd><time datetime="${entry.created}" title="${entry.created}">${age(entry.created)}</time></dd>
    <dt>Parents</dt><dd>${
      entry.parents.length
        ? entry.parents.map((p, i) => html`${i ? ", " : ""}${snapshotLink(p)}`)
        : html`<span class="muted">none (a first snapshot)</span>`
    }</dd>
    ${entry.labels.length ? html`<dt>Labels</dt><dd>${entry.labels.map((l) => html`<span class="badge label">${l}</span> `)}</dd>` : ""}
    ${
      source
        ? html`<dt>Source</dt><dd><code>${source.path}</code>${
            source.git
              ? html` at git <code>${source.git.commit.slice(0, 12)}</code>${source.git.dirty ? " (with uncommitted changes)" : ""}`
              : ""
          }</dd>`
        : ""
    }
    <dt>Checks</dt><dd>${
      entry.checks?.length
        ? entry.checks.map((c) => html`${checkBadge(entry.id, c)} `)
        : html`<span class="muted">none recorded</span> `
    }<a data-test="snapshot-checks" href="${href("checks", entry.id)}">all runs</a></dd>
  </dl>`;
}

async function merge(entry) {
  const source = entry.source?.path ?? "";
  const fields = html`<label class="field">Git repository
      <input name="into" data-test="merge-into" required value="${source}" placeholder="/path/to/repository"></label>
    <label class="field">New branch <span class="muted">(optional)</span>
      <input name="branch" data-test="merge-branch" placeholder="cairn/…"></label>
    ${
      entry.checks?.length
        ? html`<fieldset><legend>Merge only if these checks passed</legend>${entry.checks.map(
            (c) => html`<label class="check-choice"><input type="checkbox" name="require"
                value="${c.check}" data-test="merge-require" data-check="${c.check}">
                ${c.check} <span class="${c.passed ? "n-ins" : "n-del"}">(${c.passed ? "passed" : "failed"})</span></label>`,
          )}</fieldset>`
        : html`<p class="muted">No checks are recorded for this snapshot's files.</p>`
    }`;
  const form = await confirmAction({
    action: "merge",
    title: "Merge into a git repository",
    body: html`<p>Commit <code>${shortId(entry.id)}</code> “${entry.message.split("\n")[0]}”
      to a new branch of the repository (its current branch and files stay as they are).</p>`,
    fields,
    ok: "Merge",
  });
  if (!form) return;
  const args = { snapshot: entry.id, into: form.get("into").trim() };
  const branch = form.get("branch").trim();
  if (branch) args.branch = branch;
  const require = form.getAll("require");
  if (require.length) args.require = require;
  try {
    const done = await call("merge", args);
    notice({
      action: "merge",
      message: `Merged ${shortId(done.snapshot)} into ${done.repository}: commit ${String(done.commit).slice(0, 12)} on ${done.branch}${
        done.verified?.length ? `, verified: ${done.verified.map((v) => v.check).join(", ")}` : ""
      }.`,
    });
  } catch (e) {
    noticeError(e, "merge");
  }
}

export const snapshot = {
  viewName: () => "snapshot",
  title: ({ id }) => `snapshot ${shortId(id)}`,
  async render(view) {
    const [entry, outcome] = await view.data;
    const parent = entry.parents[0];
    if (!view.current()) return;
    view.main.innerHTML = String(html`<h1>Snapshot <code class="id" data-test="snapshot-id">${entry.id}</code></h1>
      <pre class="message">${entry.message || "(no message)"}</pre>
      ${facts(entry)}
      <div class="actions"><button type="button" data-test="action-merge">Merge into a repository…</button></div>
      ${parent ? html`<h2>Changes against ${shortId(parent)}</h2>` : html`<p class="note">A first snapshot: nothing before it to compare with.</p>`}
      <div data-diff></div>`);
    view.main.querySelector("[data-test=action-merge]").onclick = () => merge(entry);
    if (outcome) {
      renderDiff(view, view.main.querySelector("[data-diff]"), outcome, {
        aSnap: parent,
        bSnap: entry.id,
      });
    }
    view.done();
  },
  // A snapshot does not change; what is recorded of it (checks) does.
  async refresh(view) {
    const entry = await snapshotEntry(view.params.id);
    const old = view.main.querySelector(".facts");
    if (!view.current() || !old) return;
    old.outerHTML = String(facts(entry));
    view.done();
  },
};
