// A worktree's operation log (op_log) under its timeline, read when opened: what each
// operation did to the head, which ones undo and redo would take, and buttons for both.

import { call } from "../api.js";
import { errorBox, reverse } from "../dialog.js";
import { age, html, snapshotLink } from "../dom.js";

/** The newest operations shown (the log has no pages; a long one is cut). */
const SHOWN = 200;

export function section() {
  return html`<details class="oplog" data-test="op-log">
    <summary>Operations <span class="hint">(the op log: what undo and redo take)</span></summary>
    <div data-oplog></div>
  </details>`;
}

function row(op, next) {
  const state = op.undone ? "undone" : op.undoable ? "undoable" : "";
  const action =
    op.seq === next.undo
      ? html`<button type="button" class="small" data-test="op-undo">Undo</button>`
      : op.seq === next.redo
        ? html`<button type="button" class="small" data-test="op-redo">Redo</button>`
        : "";
  return html`<tr data-test="op-row" data-seq="${op.seq}" data-op="${op.op}" data-state="${state}">
    <td class="num-col">#${op.seq}</td>
    <td>${op.op}${op.undoes ? html` <span class="muted">of #${op.undoes}</span>` : ""}${
      op.redoes ? html` <span class="muted">of #${op.redoes}</span>` : ""
    }</td>
    <td>${snapshotLink(op.before)} → ${snapshotLink(op.after)}</td>
    <td><time datetime="${op.time}" title="${op.time}">${age(op.time)}</time></td>
    <td>${op.by ?? ""}${op.detail ? html` <span class="muted">${op.detail}</span>` : ""}</td>
    <td>${state ? html`<span class="badge">${state}</span>` : ""} ${action}</td>
  </tr>`;
}

/** Reads the log into the section (when it is open) and wires its buttons. */
export async function load(view, dir) {
  const box = view.main.querySelector("[data-test=op-log]");
  if (!box?.open) return;
  const target = box.querySelector("[data-oplog]");
  let outcome;
  try {
    outcome = await call("op_log", { dir });
  } catch (e) {
    if (view.current()) target.innerHTML = String(errorBox(e, "op log"));
    view.done();
    return;
  }
  if (!view.current()) return;
  const ops = outcome.ops;
  // Undo takes the newest undoable operation, redo the newest undone one.
  const next = {
    undo: ops.find((op) => op.undoable)?.seq,
    redo: ops.find((op) => op.undone)?.seq,
  };
  target.innerHTML = String(
    ops.length
      ? html`<table class="list"><thead><tr><th scope="col" class="num-col">#</th><th scope="col">Operation</th>
          <th scope="col">Head</th><th scope="col">When</th><th scope="col">By</th><th scope="col"></th></tr></thead>
          <tbody>${ops.slice(0, SHOWN).map((op) => row(op, next))}</tbody></table>
          ${ops.length > SHOWN ? html`<p class="hint">The newest ${SHOWN} of ${ops.length}.</p>` : ""}`
      : html`<p class="muted">No operations recorded.</p>`,
  );
  target.onclick = async (event) => {
    const test = event.target.closest("button")?.dataset.test;
    if (test === "op-undo" || test === "op-redo") {
      if (await reverse(test === "op-undo" ? "undo" : "redo", dir)) view.changed();
    }
  };
  view.done();
}

/** Loads the log each time the section is opened. */
export function wire(view, dir) {
  const box = view.main.querySelector("[data-test=op-log]");
  box.addEventListener("toggle", () => load(view, dir));
}
