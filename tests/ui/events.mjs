// An open timeline follows a change another process makes to the store, without reload.

import { at, newPage, open, readyCount, rendered, run, runCommand, timelineHash } from "./harness.mjs";
import { timelineIds as rows } from "./read.mjs";

run(async (input, browser) => {
  const page = await newPage(browser);
  await open(page, at(input, timelineHash(input.worktree)), "timeline");
  let navigations = 0;
  page.on("framenavigated", (frame) => {
    if (frame === page.mainFrame()) navigations += 1;
  });
  await page.evaluate(() => {
    window.cairnSamePage = true;
  });
  const before = await rows(page);
  const ready = await readyCount(page);
  const output = runCommand(input);
  await rendered(page, "timeline", ready);
  const made = JSON.parse(output).snapshot;
  await page.waitForSelector(`[data-test="timeline-row"][data-snapshot="${made}"]`);
  return {
    output,
    before,
    after: await rows(page),
    navigations,
    same_page: await page.evaluate(() => window.cairnSamePage === true),
  };
});
