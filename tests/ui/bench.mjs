// benches/ui.rs: opens each case's view in a new context, round after round, the cases
// interleaved; for each run the time from the navigation's start to the view's first
// `cairn:rendered:<view>` mark; of it, the page's shell (its modules loaded: DOMContent-
// Loaded), the verb calls (first request to last answer) and the drawing after the last
// answer; how many items it showed, and for a diff the time until all its files are in
// (`diff-files` data-complete).

import { at, newPage, open, run, shot, timelineHash } from "./harness.mjs";

run(async (input, browser) => {
  const times = {};
  for (let round = 0; round < input.rounds; round += 1) {
    for (const c of input.cases) {
      const page = await newPage(browser);
      await open(page, at(input, c.hash ?? timelineHash(c.worktree)), c.view);
      let complete = null;
      if (c.view === "snapshot" || c.view === "diff") {
        await page.waitForFunction(
          () => document.querySelector('[data-test="diff-files"]')?.dataset.complete === "true",
          null,
          { polling: "raf" },
        );
        complete = await page.evaluate(() => performance.now());
      }
      const seen = await page.evaluate(
        ([view, items]) => {
          const [mark] = performance.getEntriesByName(`cairn:rendered:${view}`, "mark");
          const calls = performance
            .getEntriesByType("resource")
            .filter((r) => new URL(r.name).pathname.startsWith("/v1/") && r.startTime < mark.startTime)
            .filter((r) => !r.name.endsWith("/v1/events"));
          const first = Math.min(...calls.map((r) => r.startTime));
          const last = Math.max(...calls.map((r) => r.responseEnd));
          const [navigation] = performance.getEntriesByType("navigation");
          return {
            render: mark.startTime,
            shell: navigation.domContentLoadedEventEnd,
            verbs: calls.length ? last - first : 0,
            drawn: calls.length ? mark.startTime - last : 0,
            items: document.querySelectorAll(`[data-test="${items}"]`).length,
          };
        },
        [c.view, c.items],
      );
      if (round === 0) await shot(page, input, `bench-${c.name}`);
      await page.context().close();
      (times[c.name] ??= []).push({ ...seen, complete });
    }
  }
  return times;
});
