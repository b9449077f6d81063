// The page: routes in the hash, one view module each; the render hooks tests and the
// benchmark wait on; re-rendering on each store change the server reports.

import { watchStore } from "./api.js";
import { errorBox } from "./dialog.js";
import { checkedKeys, restoreChecked } from "./dom.js";
import * as checks from "./views/checks.js";
import * as compare from "./views/compare.js";
import * as diff from "./views/diff.js";
import * as file from "./views/file.js";
import * as store from "./views/store.js";
import * as timeline from "./views/timeline.js";
import * as worktrees from "./views/worktrees.js";

// Each route: its first hash segment, the view, and how the segments after it (decoded)
// become the view's parameters.
const ROUTES = {
  "": [worktrees, () => ({})],
  worktree: [timeline, (p) => ({ path: p.join("/") })],
  snapshot: [diff.snapshot, ([id]) => ({ id })],
  diff: [diff.between, ([a, b]) => ({ a, b })],
  file: [file, ([snapshot, ...path]) => ({ snapshot, path: path.join("/") })],
  compare: [compare, ([ids]) => ({ ids: (ids ?? "").split(",").filter(Boolean) })],
  checks: [checks, ([snapshot, ...name]) => ({ snapshot, check: name.join("/") || null })],
  store: [store, () => ({})],
};

function route(hash) {
  const parts = hash.replace(/^#\/?/, "").split("/");
  const [head, ...rest] = parts;
  const found = ROUTES[head] ?? ROUTES[""];
  let decoded;
  try {
    decoded = rest.map(decodeURIComponent);
  } catch {
    decoded = rest;
  }
  return { module: found[0], params: found[1](decoded) };
}

let generation = 0;
let renders = 0;
let active = null;

/** The hooks of a finished render (see the design's "Hooks for tests and the benchmark"). */
function rendered(name) {
  const body = document.body;
  body.dataset.view = name;
  body.dataset.ready = String(++renders);
  delete body.dataset.busy;
  performance.mark(`cairn:rendered:${name}`);
}

/** Renders the view the hash names. `again`: the same view re-rendered (a store change),
 * keeping the scroll position. */
async function show({ again = false } = {}) {
  const { module, params } = route(window.location.hash);
  const name = module.viewName(params);
  const mine = ++generation;
  const main = document.getElementById("main");
  const scroll = window.scrollY;
  // A re-render keeps what the person checked (attempts to combine, paths to accept).
  const checked = again ? checkedKeys(main) : new Set();
  let first = true;
  const view = {
    main,
    params,
    again,
    current: () => mine === generation,
    // Each render of the view's data (a first one, then e.g. a page more) ends here.
    done: () => {
      if (mine !== generation) return;
      if (first) {
        first = false;
        if (again) restoreChecked(main, checked);
        window.scrollTo(0, again ? scroll : 0);
      }
      rendered(name);
    },
    rerender: () => show({ again: true }),
  };
  active = { module, view };
  document.body.dataset.view = name;
  document.body.dataset.busy = "1";
  document.title = `cairn · ${module.title(params)}`;
  markNav(name);
  try {
    await module.render(view);
  } catch (e) {
    if (!view.current()) return;
    main.innerHTML = String(errorBox(e));
    view.done();
  }
  if (!again && view.current()) main.focus({ preventScroll: true });
}

function markNav(name) {
  for (const link of document.querySelectorAll("nav a[data-view]")) {
    const here = link.dataset.view === name;
    if (here) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
}

// A store change: the view refreshes what it shows (its own `refresh` when it keeps
// state such as the pages of a timeline it loaded, else a re-render). Changes that come
// while one is being fetched are folded into one more refresh after it.
let refreshing = null;
let pending = false;

async function storeChanged() {
  if (refreshing) {
    pending = true;
    return;
  }
  const current = active;
  if (!current) return;
  refreshing = current.module.refresh
    ? current.module.refresh(current.view).catch(() => current.view.rerender())
    : current.view.rerender();
  await refreshing;
  refreshing = null;
  if (pending) {
    pending = false;
    storeChanged();
  }
}

const LIVE = {
  open: ["live", "Updates as the store changes"],
  reconnecting: ["reconnecting…", "Lost the server's events; trying again"],
  closed: ["not live", "The server refused its events: open the URL cairn ui printed"],
};

function liveState(state) {
  const badge = document.querySelector("[data-test=live]");
  badge.dataset.state = state;
  [badge.textContent, badge.title] = LIVE[state];
}

window.addEventListener("hashchange", () => show());
watchStore(storeChanged, liveState);
show();
