// The compare grid: each attempt's column and each cell's group and colour.

import { at, newPage, open, run, shot } from "./harness.mjs";

run(async (input, browser) => {
  const page = await newPage(browser);
  await open(page, at(input, input.hash), "compare");
  const seen = await page.evaluate(() => {
    const all = (name, scope = document) => [...scope.querySelectorAll(`[data-test="${name}"]`)];
    return {
      attempts: all("compare-attempt").map((column) => ({
        ...column.dataset,
        checks: all("attempt-check", column).map(({ dataset }) => ({
          check: dataset.check,
          passed: dataset.passed,
        })),
        diff: column.querySelector('[data-test="attempt-diff"]')?.href ?? null,
      })),
      cells: all("compare-cell").map((cell) => ({
        ...cell.dataset,
        colour: getComputedStyle(cell).backgroundColor,
      })),
      identical: all("compare-identical").map((group) => group.dataset.snapshots),
    };
  });
  await shot(page, input, "compare");
  return seen;
});
