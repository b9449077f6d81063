// The page: the view of the route in the hash (routes.js), with the data its first render
// shows; the render hooks tests and the benchmark wait on; re-rendering on each store
// change the server reports.

import { watchStore } from "./api.js";
import { errorBox } from "./dialog.js";
import { checkedKeys, restoreChecked } from "./dom.js";
import { route, viewOf } from "./routes.js";

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
  const { entry, params } = route(window.location.hash);
  const mine = ++generation;
  const main = document.getElementById("main");
  document.body.dataset.busy = "1";
  // Asked at once, while the view's module loads; the view's render awaits it.
  const data = entry.load(params);
  data.catch(() => {});
  let module;
  try {
    module = await viewOf(entry);
  } catch (e) {
    if (mine !== generation) return;
    main.innerHTML = String(errorBox(e));
    rendered("error");
    return;
  }
  if (mine !== generation) return;
  const name = module.viewName(params);
  const scroll = window.scrollY;
  // A re-render keeps what the person checked (attempts to combine, paths to accept).
  const checked = again ? checkedKeys(main) : new Set();
  let first = true;
  const view = {
    main,
    params,
    data,
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
    // An action of the view changed the store: its event refreshes the view (one refresh
    // per change); without the event stream, the page refreshes now.
    changed: () => {
      if (live !== "open") refreshView();
    },
  };
  active = { module, view };
  document.body.dataset.view = name;
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
// state such as the pages of a timeline it loaded, else a re-render). This is the page's
// one refresh path: changes that come while one is being fetched are folded into one
// more refresh after it. `body[data-changes]` counts the changes reported, and
// `body[data-refreshing]` is set while their refresh is in flight (hooks for tests).
let refreshing = false;
let pending = false;
let changes = 0;
let live = null;

function storeChanged() {
  document.body.dataset.changes = String(++changes);
  refreshView();
}

async function refreshView() {
  if (refreshing) {
    pending = true;
    return;
  }
  refreshing = true;
  document.body.dataset.refreshing = "1";
  try {
    do {
      pending = false;
      const current = active;
      if (!current) break;
      await (current.module.refresh
        ? current.module.refresh(current.view).catch(() => current.view.rerender())
        : current.view.rerender());
    } while (pending);
  } finally {
    // A refresh that failed leaves the next change its own.
    refreshing = false;
    delete document.body.dataset.refreshing;
  }
}

const LIVE = {
  open: ["live", "Updates as the store changes"],
  reconnecting: ["reconnecting…", "Lost the server's events; trying again"],
  closed: ["not live", "The server refused its events: open the URL cairn ui printed"],
};

function liveState(state) {
  live = state;
  const badge = document.querySelector("[data-test=live]");
  badge.dataset.state = state;
  [badge.textContent, badge.title] = LIVE[state];
}

window.addEventListener("hashchange", () => show());
watchStore(storeChanged, liveState);
show();
