// A diff view (`#/snapshot/<id>` or `#/diff/<a>/<b>`) in unified mode, then side by side.

import { at, newPage, open, run, shot } from "./harness.mjs";
import { diffFiles } from "./read.mjs";

/// Presses the mode button `name` and waits until every file shows that mode's lines.
async function mode(page, name, lines) {
  const button = page.locator(`[data-test="diff-mode-${name}"]`);
  if ((await button.getAttribute("aria-pressed")) !== "true") await button.click();
  await page.waitForFunction(
    ([name, lines]) =>
      document.querySelector(`[data-test="diff-mode-${name}"]`)?.getAttribute("aria-pressed") ===
        "true" &&
      [...document.querySelectorAll('[data-test="diff-file"]')].every(
        (file) =>
          file.dataset.binary === "true" ||
          file.querySelector(`[data-test="${lines}"]`) ||
          // A rename or mode change alone has no lines.
          !file.querySelector('[data-test="diff-hunk"], [data-test="diff-split-row"]'),
      ),
    [name, lines],
  );
}

run(async (input, browser) => {
  const page = await newPage(browser);
  await open(page, at(input, input.hash), input.view);
  await mode(page, "unified", "diff-line");
  const unified = await diffFiles(page);
  await shot(page, input, `${input.shot}-unified`);
  await mode(page, "split", "diff-cell");
  const split = await diffFiles(page);
  await shot(page, input, `${input.shot}-split`);
  // One list of files: each with its unified lines and its side-by-side cells.
  const files = unified.files.map((file) => ({
    ...file,
    cells: split.files.find((other) => other.path === file.path)?.cells ?? [],
  }));
  return { stat: unified.stat, files };
});
