// The views left: a file at a snapshot, a snapshot's checks and a check's output, a first
// snapshot's page, the store; and the worktrees list, each with a screenshot.

import { at, go, newPage, open, run, shot } from "./harness.mjs";

run(async (input, browser) => {
  // A first snapshot's page asks for its diff against its first parent with its log entry,
  // at once: nothing it asks fails (no error in the console), and it shows the note.
  const page = await newPage(browser);
  const { snapshot, path, check } = input;
  await open(page, at(input, `#/file/${snapshot}/${path}`), "file");
  const file = await page.$eval('[data-test="file-content"]', (node) => ({
    ...node.dataset,
    text: node.textContent,
  }));
  await shot(page, input, "file");

  await go(page, `#/checks/${snapshot}`, "checks");
  const checks = await page.$$eval('[data-test="check-row"]', (rows) =>
    rows.map(({ dataset }) => ({
      check: dataset.check,
      passed: dataset.passed,
      attestation: dataset.attestation,
    })),
  );
  await shot(page, input, "checks");

  await go(page, `#/checks/${snapshot}/${check}`, "check-log");
  const log = await page.evaluate(() => ({
    stdout: document.querySelector('[data-test="check-stdout"]')?.textContent ?? null,
    stderr: document.querySelector('[data-test="check-stderr"]')?.textContent ?? null,
  }));
  await shot(page, input, "check-log");

  await go(page, `#/snapshot/${input.first}`, "snapshot");
  const first = await page.evaluate(() => ({
    id: document.querySelector('[data-test="snapshot-id"]')?.textContent ?? null,
    note: document.querySelector(".note")?.textContent ?? null,
    files: document.querySelectorAll('[data-test="diff-file"]').length,
    errors: document.querySelectorAll('[data-test="error"]').length,
  }));

  await go(page, "#/store", "store");
  const store = await page.evaluate(() => {
    const bytes = (name) => document.querySelector(`[data-test="${name}"]`)?.dataset.bytes ?? null;
    return { bytes: bytes("store-bytes"), freed: bytes("gc-freed") };
  });
  await shot(page, input, "store");

  await go(page, "#/", "worktrees");
  await shot(page, input, "worktrees");
  return { file, checks, log, first, store };
});
