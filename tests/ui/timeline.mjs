// A worktree's timeline: each row as the page shows it.

import { at, timelineHash, newPage, open, run, shot } from "./harness.mjs";
import { timelineRows } from "./read.mjs";

run(async (input, browser) => {
  const page = await newPage(browser);
  await open(page, at(input, timelineHash(input.worktree)), "timeline");
  const list = await page.$eval('[data-test="timeline-list"]', (node) => ({ ...node.dataset }));
  const rows = await timelineRows(page);
  await shot(page, input, "timeline");
  return { list, rows };
});
