// Rewinds a worktree from its timeline: the row's rewind action, then the dialog's OK (or
// Cancel, with `confirm: false`).

import { at, timelineHash, failOnErrors, newPage, open, readyCount, rendered, run, shot } from "./harness.mjs";
import { headMoved } from "./read.mjs";

run(async (input, browser) => {
  const page = await newPage(browser);
  await open(page, at(input, timelineHash(input.worktree)), "timeline");
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
  await page.locator('[data-test="confirm-ok"]').click();
  const notice = page.locator('[data-test="notice"][data-action="rewind"]');
  await notice.waitFor({ state: "visible" });
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
