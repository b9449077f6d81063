// An open timeline follows a change another process makes to the store, without reload.

import { execFileSync } from "node:child_process";
import { at, timelineHash, newPage, open, readyCount, rendered, run } from "./harness.mjs";

const rows = (page) =>
  page.$$eval('[data-test="timeline-row"]', (rows) => rows.map((row) => row.dataset.snapshot));

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
  const [program, ...args] = input.command;
  const output = execFileSync(program, args, {
    encoding: "utf8",
    env: { ...process.env, HOME: input.home, NO_COLOR: "1" },
  });
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
