// What each view shows, read off the page by its data-test names (listed under "Notes
// from ui-page" in the design).

/// Each `timeline-row`: its snapshot, head and checkpoint marks, message, labels, time,
/// `+N -M`, checks, and whether it offers a rewind.
export async function timelineRows(page) {
  return page.$$eval('[data-test="timeline-row"]', (rows) =>
    rows.map((row) => {
      const one = (name) => row.querySelector(`[data-test="${name}"]`);
      const all = (name) => [...row.querySelectorAll(`[data-test="${name}"]`)];
      const stat = one("timeline-stat");
      return {
        snapshot: row.dataset.snapshot,
        head: row.dataset.head,
        checkpoint: row.dataset.checkpoint ?? null,
        message: one("timeline-message")?.textContent.trim() ?? null,
        labels: all("timeline-label").map((label) => label.textContent.trim()),
        created: one("timeline-age")?.getAttribute("datetime") ?? null,
        stat: stat && { ...stat.dataset, text: stat.textContent.trim() },
        checks: all("timeline-check").map((check) => ({ ...check.dataset })),
        rewind: Boolean(one("action-rewind")),
      };
    }),
  );
}

/// The snapshot of the timeline's head row.
export async function headRow(page) {
  return page.$eval('[data-test="timeline-row"][data-head="true"]', (row) => row.dataset.snapshot);
}

/// Waits until the timeline marks `id` as the head; then the head row's snapshot.
export async function headMoved(page, id) {
  await page.waitForFunction(
    (id) =>
      document.querySelector('[data-test="timeline-row"][data-head="true"]')?.dataset.snapshot ===
      id,
    id,
  );
  return headRow(page);
}

/// The snapshot of each timeline row, in order.
export async function timelineIds(page) {
  return page.$$eval('[data-test="timeline-row"]', (rows) => rows.map((row) => row.dataset.snapshot));
}

/// The diff view's `diff-stat` and each `diff-file` with its lines: in unified mode
/// `diff-line`s (kind, old, new, text), in side-by-side mode `diff-cell`s (side, kind,
/// line, text).
export async function diffFiles(page) {
  return page.evaluate(() => {
    const stat = document.querySelector('[data-test="diff-stat"]');
    const files = [...document.querySelectorAll('[data-test="diff-file"]')].map((file) => {
      const lines = [...file.querySelectorAll('[data-test="diff-line"]')].map((line) => {
        const entry = { kind: line.dataset.kind, text: line.textContent };
        if (line.dataset.old !== undefined) entry.old = line.dataset.old;
        if (line.dataset.new !== undefined) entry.new = line.dataset.new;
        return entry;
      });
      const cells = [...file.querySelectorAll('[data-test="diff-cell"]')].map((cell) => ({
        side: cell.dataset.side,
        kind: cell.dataset.kind,
        line: cell.dataset.line,
        text: cell.textContent,
      }));
      return {
        path: file.dataset.path,
        status: file.dataset.status,
        from: file.dataset.from ?? null,
        binary: file.dataset.binary ?? null,
        lines,
        cells,
      };
    });
    return { stat: stat && { ...stat.dataset }, files };
  });
}
