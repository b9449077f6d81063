// Rewinds a worktree from its timeline: the row's rewind action, then the dialog's OK (or
// Cancel, with `confirm: false`). Counts the verb calls the page makes: after the rewind,
// the rewind and then one refresh, which calls what the timeline's first render called.

import { at, timelineHash, failOnErrors, newPage, open, readyCount, rendered, run, shot } from "./harness.mjs";
import { headMoved } from "./read.mjs";

run(async (input, browser) => {
  const page = await newPage(browser);
  const calls = [];
  page.on("request", (request) => {
    const path = new URL(request.url()).pathname;
    if (path.startsWith("/v1/") && path !== "/v1/events") calls.push(path.slice("/v1/".length));
  });
  await open(page, at(input, timelineHash(input.worktree)), "timeline");
  const opened = calls.length;
  const row = page.locator(`[data-test="timeline-row"][data-snapshot="${input.to}"]`);
  await row.locator('[data-test="action-rewind"]').click();
  const dialog = page.locator('[data-test="confirm-dialog"]');
  await dialog.waitFor({ state: "visible" });
  const out = { dialog: await dialog.getAttribute("data-action") };
  if (!input.confirm) {
    await page.locator('[data-test="confirm-cancel"]').click();
    await dialog.waitFor({ state: "hidden" });
    failOnErrors(page);
    return out;
  }
  await shot(page, input, "rewind-confirm");
  const before = await readyCount(page);
  const changes = await page.evaluate(() => Number(document.body.dataset.changes || 0));
  await page.locator('[data-test="confirm-ok"]').click();
  const notice = page.locator('[data-test="notice"][data-action="rewind"]');
  await notice.waitFor({ state: "visible" });
  // The page has seen the rewind's store change and refreshed for it.
  await page.waitForFunction(
    (changes) =>
      Number(document.body.dataset.changes || 0) > changes && !document.body.dataset.refreshing,
    changes,
  );
  out.calls = { first_render: calls.slice(0, opened), after_rewind: calls.slice(opened) };
  // The timeline shows the new head once it has rendered again.
  await rendered(page, "timeline", before);
  out.head = await headMoved(page, input.to);
  out.notice = {
    action: await notice.getAttribute("data-action"),
    text: (await notice.innerText()).trim(),
    undo: (await notice.locator('[data-test="undo"]').count()) === 1,
  };
  await shot(page, input, "rewind-done");
  failOnErrors(page);
  return out;
});
