// A long timeline: loaded page after page as it scrolls; then another process moves the
// worktree's head to a state far down, and the open page shows what a page opened afresh
// shows, the head marked there.

import { at, newPage, open, readyCount, rendered, run, runCommand, shot, timelineHash } from "./harness.mjs";
import { headMoved, timelineIds as ids } from "./read.mjs";

/// Scrolls to the end until every state is loaded; the count loaded after each page.
async function loadAll(page) {
  const list = page.locator('[data-test="timeline-list"]');
  const count = async (name) => Number(await list.getAttribute(`data-${name}`));
  const loaded = [await count("loaded")];
  while (loaded.at(-1) < (await count("total"))) {
    if (loaded.length > 50) throw new Error(`the timeline stopped loading: ${loaded}`);
    const ready = await readyCount(page);
    await page.evaluate(() => window.scrollTo(0, document.body.scrollHeight));
    await rendered(page, "timeline", ready);
    loaded.push(await count("loaded"));
  }
  return { loaded, total: await count("total") };
}

run(async (input, browser) => {
  const page = await newPage(browser);
  const timeline = at(input, timelineHash(input.worktree));
  await open(page, timeline, "timeline");
  const { loaded, total } = await loadAll(page);
  const rows = await ids(page);
  await shot(page, input, "timeline-long");

  const ready = await readyCount(page);
  runCommand(input);
  await rendered(page, "timeline", ready);
  const head = await headMoved(page, input.to);
  const after = await ids(page);
  const fresh = await newPage(browser);
  await open(fresh, timeline, "timeline");
  await loadAll(fresh);
  return {
    loaded,
    total,
    rows,
    head,
    heads: await page.$$eval('[data-test="timeline-row"][data-head="true"]', (rows) => rows.length),
    after,
    fresh: await ids(fresh),
  };
});
