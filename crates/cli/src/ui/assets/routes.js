// The page's routes: for each first segment of the hash, the view that shows it (a module
// under views/, loaded when first shown), its parameters, and the data its first render
// shows. The data is asked for as the route is entered, while the view's module loads:
// a view's first render never waits for its code and then for its data.

import { VerbError, call } from "./api.js";

/** States a timeline shows first (a few screens), then asks for a page at a time as the
 * list's end comes near. */
const TIMELINE_FIRST = 60;
const TIMELINE_PAGE = 200;

/** One page of a worktree's states, the `skip` newest left out (the first page if 0). */
export function timelinePage(dir, skip) {
  return call("timeline", { dir, max_count: skip ? TIMELINE_PAGE : TIMELINE_FIRST, skip });
}

/** The worktree's task (review), asked only when the timeline says it has one. */
async function task(dir, outcome) {
  if (!outcome.task) return {};
  try {
    return { review: await call("review", { dir }) };
  } catch (e) {
    // The task ended between the two calls.
    if (e instanceof VerbError && e.code === "no_task") return {};
    return { error: e };
  }
}

/** A timeline's newest page and its task. */
export async function timelineFirst(dir) {
  const outcome = await timelinePage(dir, 0);
  return [outcome, await task(dir, outcome)];
}

/** The diff verb's arguments for what a diff view shows: every file with its hunks (`a`
 * null: against `b`'s first parent). */
function diffArgs(a, b) {
  return a ? { a, b, patch: true } : { b, patch: true };
}

/** A snapshot's entry in the log. */
export async function snapshotEntry(id) {
  const { snapshots } = await call("log", { target: id, max_count: 1 });
  return snapshots[0];
}

/** A snapshot and its changes against its first parent (null for a first snapshot, which
 * the diff verb compares with nothing), both asked at once. */
async function snapshotFirst(id) {
  const changes = call("diff", diffArgs(null, id));
  // Awaited only once the entry came: a failure is not an unhandled rejection meanwhile.
  changes.catch(() => {});
  const entry = await snapshotEntry(id);
  return [entry, entry.parents.length ? await changes : null];
}

const all = (p) => p.join("/");

const ROUTES = {
  "": { view: "worktrees", params: () => ({}), load: () => call("worktree_list") },
  worktree: {
    view: "timeline",
    params: (p) => ({ path: all(p) }),
    load: ({ path }) => timelineFirst(path),
  },
  snapshot: {
    view: "diff",
    pick: "snapshot",
    params: ([id]) => ({ id }),
    load: ({ id }) => snapshotFirst(id),
  },
  diff: {
    view: "diff",
    pick: "between",
    params: ([a, b]) => ({ a, b }),
    load: ({ a, b }) => call("diff", diffArgs(a, b)),
  },
  file: {
    view: "file",
    params: ([snapshot, ...path]) => ({ snapshot, path: all(path) }),
    load: ({ snapshot, path }) => call("show", { object: `${snapshot}:${path}`, contents: true }),
  },
  compare: {
    view: "compare",
    params: ([ids]) => ({ ids: (ids ?? "").split(",").filter(Boolean) }),
    load: ({ ids }) => call("compare", { snapshots: ids }),
  },
  checks: {
    view: "checks",
    params: ([snapshot, ...name]) => ({ snapshot, check: all(name) || null }),
    load: ({ snapshot, check }) => call("checks", check ? { snapshot, log: check } : { snapshot }),
  },
  store: { view: "store", params: () => ({}), load: () => call("gc", { dry_run: true }) },
};

/** The route of `hash`: its entry and parameters (an unknown route is the worktrees'). */
export function route(hash) {
  const [head, ...rest] = hash.replace(/^#\/?/, "").split("/");
  const entry = ROUTES[head] ?? ROUTES[""];
  let decoded;
  try {
    decoded = rest.map(decodeURIComponent);
  } catch {
    decoded = rest;
  }
  return { entry, params: entry.params(decoded) };
}

/** The view module of a route's entry (each loaded once). */
export async function viewOf(entry) {
  const module = await import(`./views/${entry.view}.js`);
  return entry.pick ? module[entry.pick] : module;
}
