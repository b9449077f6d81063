// The confirmation every action asks for (an in-page <dialog>), the notices actions
// leave (with undo where the verb is undoable), and how an error is shown.

import { call } from "./api.js";
import { html, shortId } from "./dom.js";

const dialog = () => document.getElementById("confirm");

/**
 * Asks to confirm an action. `body` and `fields` are HTML (from `html`); the fields'
 * values come back as a FormData when the person confirms, null when they cancel.
 */
export function confirmAction({ action, title, body, fields = "", ok = "Confirm", danger = false }) {
  const box = dialog();
  box.dataset.action = action;
  box.querySelector("#confirm-title").textContent = title;
  box.querySelector("#confirm-body").innerHTML = String(body);
  box.querySelector("#confirm-fields").innerHTML = String(fields);
  const okButton = box.querySelector("[data-test=confirm-ok]");
  okButton.textContent = ok;
  okButton.classList.toggle("danger", danger);
  const form = box.querySelector("form");
  form.reset();
  box.returnValue = "";
  return new Promise((resolve) => {
    box.addEventListener(
      "close",
      () => resolve(box.returnValue === "ok" ? new FormData(form) : null),
      { once: true },
    );
    box.showModal();
    (box.querySelector("#confirm-fields input:not([type=checkbox])") ?? okButton).focus();
  });
}

/** An error as the page shows it (data-test=error, with the error's code). */
export function errorBox(error, what = "") {
  const code = error?.code ?? "error";
  const details = refusalDetails(error?.outcome);
  return html`<div class="error" role="alert" data-test="error" data-code="${code}">
    <strong>${what ? `${what}: ` : ""}${code === "refused" ? "refused" : code}</strong>
    <span class="error-message">${error?.message ?? String(error)}</span>${details}</div>`;
}

/** What a refused outcome lists (conflicts, dirty paths, checks that do not count). */
function refusalDetails(outcome) {
  if (!outcome) return "";
  const items = [
    ...(outcome.conflicts ?? []).map((c) => `${c.kind} conflict: ${c.path}`),
    ...(outcome.dirty ?? []).map((p) => `uncommitted changes: ${p}`),
    ...(outcome.unverified ?? []).map((u) => `check ${u.check}: ${u.reason}`),
    ...(outcome.refused ?? []).map((r) => `${r.path}: ${r.reason}`),
  ];
  if (items.length === 0) return "";
  return html`<ul>${items.map((i) => html`<li>${i}</li>`)}</ul>`;
}

const notices = () => document.getElementById("notices");

/** Shows a notice after an action; `undoWorktree` offers undo of that worktree's newest change. */
export function notice({ action, message, undoWorktree = null, onDone = () => {} }) {
  const item = document.createElement("div");
  item.className = "notice";
  item.dataset.test = "notice";
  item.dataset.action = action;
  item.setAttribute("role", "status");
  item.innerHTML = String(html`<span class="notice-text">${message}</span>
    ${undoWorktree ? html`<button type="button" data-test="undo">Undo</button>` : ""}
    <button type="button" class="quiet" data-close aria-label="Dismiss">×</button>`);
  item.querySelector("[data-close]").addEventListener("click", () => item.remove());
  item.querySelector("[data-test=undo]")?.addEventListener("click", async () => {
    const undone = await reverse("undo", undoWorktree);
    if (undone) item.remove();
    onDone();
  });
  notices().replaceChildren(item);
  return item;
}

/** Shows an action's error among the notices. */
export function noticeError(error, what) {
  const item = document.createElement("div");
  item.className = "notice notice-error";
  item.innerHTML = String(html`${errorBox(error, what)}
    <button type="button" class="quiet" data-close aria-label="Dismiss">×</button>`);
  item.querySelector("[data-close]").addEventListener("click", () => item.remove());
  notices().replaceChildren(item);
}

/** Asks, then reverts the worktree's newest change set (`undo`) or re-applies the newest
 * one undone (`redo`); whether it ran. */
export async function reverse(verb, worktree) {
  const undo = verb === "undo";
  const confirmed = await confirmAction({
    action: verb,
    title: undo ? "Undo" : "Redo",
    body: undo
      ? html`<p>Revert the newest change of <code>${worktree}</code>? If any file it
          touched changed since, nothing is done and the files are listed.</p>`
      : html`<p>Apply again the newest change undone in <code>${worktree}</code>? If any
          file it touches changed since, nothing is done and the files are listed.</p>`,
    ok: undo ? "Undo" : "Redo",
  });
  if (!confirmed) return false;
  try {
    const done = await call(verb, { worktree });
    const files = (undo ? done.reverted : done.reapplied) ?? [];
    const item = notice({
      action: verb,
      message: `${undo ? "Undone" : "Redone"}: ${files.length} file${files.length === 1 ? "" : "s"} ${
        undo ? "put back" : "changed again"
      }; head ${shortId(done.snapshot)}.`,
    });
    item.dataset.test = `${verb}-done`;
    return true;
  } catch (e) {
    noticeError(e, verb);
    return false;
  }
}
