// `#/worktree/<path>`: a worktree's timeline (the timeline verb: its newest 60 states,
// then 200 a page as the list scrolls), its task's changes (review) with accept and
// discard, and rewind to any state.

import { call } from "../api.js";
import { timelineFirst, timelinePage } from "../routes.js";
import * as oplog from "./oplog.js";
import { confirmAction, errorBox, notice, noticeError } from "../dialog.js";
import {
  age,
  attr,
  changesOf,
  checkBadge,
  checkedKeys,
  href,
  html,
  plusMinus,
  raw,
  restoreChecked,
  shortId,
  snapshotLink,
} from "../dom.js";

export const viewName = () => "timeline";
export const title = (params) => `timeline of ${params.path}`;

function row(e, now) {
  const stat = e.stat?.stats;
  return html`<li class="trow${e.head ? " head" : ""}" data-test="timeline-row"
      data-snapshot="${e.id}" data-head="${String(e.head)}"${attr("data-checkpoint", e.checkpoint)}>
    <input type="checkbox" data-test="timeline-select" data-snapshot="${e.id}"
      aria-label="Select ${shortId(e.id)} to compare">
    <span class="marker" ${e.head ? html`title="the worktree's head"` : ""}>${e.head ? "● head" : ""}</span>
    <div class="what">
      ${snapshotLink(e.id, { test: "timeline-link" })}
      <span class="msg" data-test="timeline-message" title="${e.message}">${e.message}</span>
      ${e.checkpoint ? html`<span class="badge checkpoint" title="checkpoint">⚑ ${e.checkpoint}</span>` : ""}
      ${e.labels.map((l) => html`<span class="badge label" data-test="timeline-label">${l}</span>`)}
    </div>
    <div class="checks">${(e.checks ?? []).map((c) => checkBadge(e.id, c, "timeline-check"))}</div>
    ${
      stat
        ? html`<span class="stat" data-test="timeline-stat" data-files="${stat.files}"
            data-insertions="${stat.insertions}" data-deletions="${stat.deletions}"
            title="${stat.files} file${stat.files === 1 ? "" : "s"} changed">${plusMinus(stat.insertions, stat.deletions)}</span>`
        : html`<span class="stat muted">—</span>`
    }
    <time data-test="timeline-age" datetime="${e.created}" title="${e.created}">${age(e.created, now)}</time>
    ${
      e.head
        ? html`<span></span>`
        : html`<button type="button" class="small" data-test="action-rewind" data-snapshot="${e.id}">Rewind here</button>`
    }
  </li>`;
}

function rows(entries) {
  const now = Date.now();
  return String(html`${entries.map((e) => row(e, now))}`);
}

function taskPanel(found) {
  if (found.error) return errorBox(found.error, "review");
  const review = found.review;
  if (!review) return "";
  const changes = changesOf(review);
  const s = review.stats;
  return html`<section class="task" data-test="task-panel" data-baseline="${review.baseline}"
      aria-labelledby="task-title">
    <h2 id="task-title">Task</h2>
    <p>Changes since its baseline ${snapshotLink(review.baseline)}:
      ${s.files} file${s.files === 1 ? "" : "s"}, ${plusMinus(s.insertions, s.deletions)}</p>
    ${
      changes.length === 0
        ? html`<p class="muted">Nothing changed since the baseline.</p>`
        : html`<ul class="task-paths">${changes.map(
            (c) => html`<li><label><input type="checkbox" data-test="task-path"
              data-path="${c.path}" data-status="${c.status}">
              <span class="status s-${c.status[0]}">${c.status[0]}</span>
              <span class="path">${c.from ? html`${c.from} → ` : ""}${c.path}</span></label>
              <span class="stat">${plusMinus(c.insertions, c.deletions)}</span></li>`,
          )}</ul>
          <div class="actions">
            <button type="button" data-test="action-accept">Accept</button>
            <button type="button" class="danger" data-test="action-discard">Discard</button>
            <span class="hint">The checked paths; with none checked, all of them.</span>
          </div>`
    }
  </section>`;
}

function meta(outcome) {
  const head = outcome.head;
  return html`Head ${
    head ? snapshotLink(head) : "none"
  } · ${outcome.total} states${
    head
      ? html` · <a data-test="live-changes" href="${href("diff", head, outcome.worktree)}">live changes since the head</a>`
      : ""
  }`;
}

function layout(dir, outcome, found) {
  return html`<h1>Timeline <code class="path">${dir}</code></h1>
    <p class="meta" data-meta>${meta(outcome)}</p>
    <div data-task>${taskPanel(found)}</div>
    ${oplog.section()}
    <div class="toolbar">
      <button type="button" data-test="compare-selected" disabled>Compare selected</button>
      <span class="hint">Check two or more states to compare them.</span>
    </div>
    <ol class="timeline" data-test="timeline-list" data-total="${outcome.total}"
      data-loaded="${outcome.entries.length}">${raw(rows(outcome.entries))}</ol>
    <div class="sentinel" aria-hidden="true"></div>
    <p class="more muted" aria-live="polite"></p>`;
}

/** What a rendered timeline keeps for paging and refreshes: the entries shown, by id,
 * and how many of the verb's list the pages so far covered. */
const states = new WeakMap();

export async function render(view) {
  const dir = view.params.path;
  const [outcome, found] = await view.data;
  if (!view.current()) return;
  draw(view, dir, outcome, found);
}

/** The timeline with its newest page. */
function draw(view, dir, outcome, found) {
  states.get(view)?.observer.disconnect();
  view.main.innerHTML = String(layout(dir, outcome, found));
  const state = {
    dir,
    total: outcome.total,
    head: outcome.head,
    entries: new Map(outcome.entries.map((e) => [e.id, e])),
    loaded: outcome.entries.length,
    loading: null,
  };
  states.set(view, state);
  wire(view, state);
  oplog.wire(view, dir);
  view.done();
}

function wire(view, state) {
  const main = view.main;
  const list = main.querySelector("[data-test=timeline-list]");
  const sentinel = main.querySelector(".sentinel");
  const observer = new IntersectionObserver(
    (seen) => {
      if (seen.some((s) => s.isIntersecting)) more(view, state, list);
    },
    { rootMargin: "1200px 0px" },
  );
  observer.observe(sentinel);
  state.observer = observer;
  main.onclick = (event) => {
    const target = event.target.closest("button");
    if (!target) return;
    if (target.dataset.test === "action-rewind") rewind(view, state, target.dataset.snapshot);
    if (target.dataset.test === "action-accept") settle(view, state, "accept");
    if (target.dataset.test === "action-discard") settle(view, state, "discard");
    if (target.dataset.test === "compare-selected") {
      const ids = [...main.querySelectorAll("[data-test=timeline-select]:checked")].map(
        (c) => c.dataset.snapshot,
      );
      window.location.hash = `#/compare/${ids.map(encodeURIComponent).join(",")}`;
    }
  };
  main.onchange = (event) => {
    if (event.target.dataset.test === "timeline-select") selectionChanged(main);
  };
}

function selectionChanged(main) {
  const checked = main.querySelectorAll("[data-test=timeline-select]:checked").length;
  main.querySelector("[data-test=compare-selected]").disabled = checked < 2;
}

function counted(list, state) {
  list.dataset.loaded = String(list.children.length);
  list.dataset.total = String(state.total);
}

/** Appends the next page when the end of the list comes near. */
async function more(view, state, list) {
  if (state.loading || state.loaded >= state.total || !view.current()) return;
  const status = view.main.querySelector(".more");
  status.textContent = `Loading more of ${state.total}…`;
  state.loading = timelinePage(state.dir, state.loaded);
  try {
    const next = await state.loading;
    if (!view.current()) return;
    // States made meanwhile move the pages down; a state already shown is not repeated.
    const fresh = next.entries.filter((e) => !state.entries.has(e.id));
    for (const e of fresh) state.entries.set(e.id, e);
    state.loaded = next.entries.length ? state.loaded + next.entries.length : next.total;
    state.total = next.total;
    list.insertAdjacentHTML("beforeend", rows(fresh));
    counted(list, state);
    status.textContent = "";
    view.done();
  } catch (e) {
    status.innerHTML = String(errorBox(e, "timeline"));
  } finally {
    state.loading = null;
  }
  // Still in sight (a tall window): keep going.
  const sentinel = view.main.querySelector(".sentinel");
  if (sentinel && sentinel.getBoundingClientRect().top < window.innerHeight + 1200) {
    more(view, state, list);
  }
}

/**
 * A store change: the newest page again, in place of the rows it holds (new states go
 * on top), and the task; rows further down stay as they are, checked boxes too. When
 * more happened than states added on top (the head moved to or from a state below the
 * newest page, states went), the timeline is shown afresh from its newest page. app.js
 * runs one refresh at a time (two at once would both put the newest page on top).
 */
export async function refresh(view) {
  const state = states.get(view);
  if (!state) return view.rerender();
  const [outcome, found] = await timelineFirst(state.dir);
  if (!view.current()) return;
  const main = view.main;
  const checked = checkedKeys(main);
  const newest = new Set(outcome.entries.map((e) => e.id));
  const added = outcome.entries.filter((e) => !state.entries.has(e.id)).length;
  const headsOnTop = [state.head, outcome.head].every((id) => !id || newest.has(id));
  if (outcome.total !== state.total + added || !headsOnTop) {
    const scroll = window.scrollY;
    const opened = main.querySelector("[data-test=op-log]").open;
    draw(view, state.dir, outcome, found);
    restoreChecked(main, checked);
    selectionChanged(main);
    window.scrollTo(0, scroll);
    // Opening it again reads the op log again.
    main.querySelector("[data-test=op-log]").open = opened;
    return;
  }
  const list = main.querySelector("[data-test=timeline-list]");
  for (const shown of [...list.children]) {
    if (newest.has(shown.dataset.snapshot)) shown.remove();
  }
  list.insertAdjacentHTML("afterbegin", rows(outcome.entries));
  for (const e of outcome.entries) state.entries.set(e.id, e);
  state.head = outcome.head;
  state.total = outcome.total;
  state.loaded += added;
  main.querySelector("[data-meta]").innerHTML = String(meta(outcome));
  main.querySelector("[data-task]").innerHTML = String(taskPanel(found));
  restoreChecked(main, checked);
  counted(list, state);
  selectionChanged(main);
  view.done();
  await oplog.load(view, state.dir);
}

async function rewind(view, state, id) {
  const row = view.main.querySelector(`[data-test=timeline-row][data-snapshot="${id}"]`);
  const message = row?.querySelector("[data-test=timeline-message]")?.textContent ?? "";
  const ok = await confirmAction({
    action: "rewind",
    title: "Rewind the worktree",
    body: html`<p>Put the files of <code>${state.dir}</code> back as they were at
      <code>${shortId(id)}</code> “${message}”?</p>
      <p>Its live files are captured first, so Undo brings them back.</p>`,
    ok: "Rewind",
    danger: true,
  });
  if (!ok) return;
  try {
    const done = await call("rewind", { dir: state.dir, to: id });
    notice({
      action: "rewind",
      message: `Rewound to ${shortId(done.snapshot)}: ${done.written.length} file(s) written, ${done.deleted.length} deleted.`,
      undoWorktree: state.dir,
      onDone: view.changed,
    });
    view.changed();
  } catch (e) {
    noticeError(e, "rewind");
  }
}

/** Accept or discard the checked task paths (all with none checked). */
async function settle(view, state, verb) {
  const paths = [...view.main.querySelectorAll("[data-test=task-path]:checked")].map(
    (c) => c.dataset.path,
  );
  const which = paths.length
    ? html`these paths: <ul>${paths.map((p) => html`<li><code>${p}</code></li>`)}</ul>`
    : html`<strong>every change of the task</strong>.`;
  const ok = await confirmAction(
    verb === "accept"
      ? {
          action: "accept",
          title: "Accept the task's changes",
          body: html`<p>Move the task's baseline forward to ${which}</p>`,
          ok: "Accept",
        }
      : {
          action: "discard",
          title: "Discard the task's changes",
          body: html`<p>Put back as the baseline has them ${which}</p>
            <p>The live state is captured first, so Undo brings them back.</p>`,
          ok: "Discard",
          danger: true,
        },
  );
  if (!ok) return;
  try {
    const args = { dir: state.dir, paths };
    if (verb === "discard" && paths.length === 0) args.yes = true;
    const done = await call(verb, args);
    const count = (verb === "accept" ? done.accepted : done.discarded).length;
    notice({
      action: verb,
      message: `${verb === "accept" ? "Accepted" : "Discarded"} ${count} path(s)${done.task_ended ? "; the task ended" : ""}.`,
      undoWorktree: state.dir,
      onDone: view.changed,
    });
    view.changed();
  } catch (e) {
    noticeError(e, verb);
  }
}
