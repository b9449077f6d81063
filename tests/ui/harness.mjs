// What every browser scenario shares: Debian's chromium launched as this machine runs it,
// a page whose console errors fail the scenario, the page's render hook, screenshots.
//
// A scenario is `node tests/ui/NAME.mjs`: it reads its input (one JSON object) from the
// environment variable CAIRN_UI_INPUT, prints what it saw as one JSON object on stdout and
// exits 0; anything wrong (a timeout, a page error) exits 1 with the reason on stderr.

import { execFileSync } from "node:child_process";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { chromium } from "playwright-core";

export const FLAGS = [
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];

/// How long a wait may take: a busy machine is slow, not wrong.
export const PATIENCE_MS = 60_000;

/// Debian's chromium, headless, in a fresh profile (playwright makes a new temporary
/// user-data-dir for each launch). `extraFlags` add to the design's flags.
export async function launch(extraFlags = []) {
  return chromium.launch({
    executablePath: "/usr/bin/chromium",
    headless: true,
    args: [...FLAGS, ...extraFlags],
    timeout: PATIENCE_MS,
  });
}

/// A page in a new context (no cookies) whose console errors and uncaught exceptions are
/// collected in `page.errors`; `allow` lists patterns of errors a scenario expects, and
/// `errorsShown` lets a render show `[data-test=error]` boxes (else a render fails).
export async function newPage(browser, { allow = [], errorsShown = false } = {}) {
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  const page = await context.newPage();
  page.setDefaultTimeout(PATIENCE_MS);
  page.errors = [];
  page.errorsShown = errorsShown;
  const expected = (text) => allow.some((pattern) => pattern.test(text));
  page.on("console", (message) => {
    if (message.type() === "error" && !expected(message.text())) {
      const where = message.location();
      page.errors.push(`console: ${message.text()} (${where.url}:${where.lineNumber})`);
    }
  });
  page.on("pageerror", (error) => {
    if (!expected(String(error))) page.errors.push(`page error: ${error.stack || error}`);
  });
  return page;
}

/// The page's render counter (`document.body.dataset.ready`), 0 before the first render.
export async function readyCount(page) {
  return page.evaluate(() => Number(document.body?.dataset.ready || 0));
}

/// Waits until the page has rendered `view` after render number `after`; the new counter.
export async function rendered(page, view, after = 0) {
  try {
    await page.waitForFunction(
      ([view, after]) =>
        document.body?.dataset.view === view && Number(document.body.dataset.ready || 0) > after,
      [view, after],
      { timeout: PATIENCE_MS, polling: 20 },
    );
  } catch (error) {
    const seen = await page
      .evaluate(() => ({ view: document.body?.dataset.view, ready: document.body?.dataset.ready }))
      .catch(() => ({}));
    throw new Error(
      `the page never rendered view ${view} after render ${after} (it shows view ` +
        `${seen.view}, render ${seen.ready}; errors: ${page.errors.join("; ") || "none"})`,
    );
  }
  failOnErrors(page);
  const shown = await page.$$eval('[data-test="error"]', (boxes) =>
    boxes.map((box) => `${box.dataset.code}: ${box.textContent.trim()}`),
  );
  if (shown.length && !page.errorsShown) {
    throw new Error(`the page shows errors rendering ${view}:\n${shown.join("\n")}`);
  }
  return readyCount(page);
}

/// Opens `url` and waits for `view` to render; the render counter.
export async function open(page, url, view) {
  const response = await page.goto(url);
  if (!response || response.status() !== 200) {
    throw new Error(`GET ${url} answered ${response && response.status()}`);
  }
  return rendered(page, view);
}

/// Throws if the page logged an error it was not told to expect.
export function failOnErrors(page) {
  if (page.errors.length) throw new Error(`the page reported errors:\n${page.errors.join("\n")}`);
}

/// A full-page screenshot `name`.png in the input's `screenshots` folder; its path.
export async function shot(page, input, name) {
  mkdirSync(input.screenshots, { recursive: true });
  const path = join(input.screenshots, `${name}.png`);
  await page.screenshot({ path, fullPage: false });
  return path;
}

/// Every element `[data-test=NAME]` (within `scope` if given): its data attributes and its
/// visible text, in document order.
export async function elements(page, name, scope = "") {
  return page.$$eval(`${scope} [data-test="${name}"]`.trim(), (nodes) =>
    nodes.map((node) => ({ ...node.dataset, text: node.innerText.replace(/\s+/g, " ").trim() })),
  );
}

/// Moves the open page to the view at `hash` (`#/...`) without reloading it and waits for
/// `view` to render; the new render counter.
export async function go(page, hash, view) {
  const before = await readyCount(page);
  await page.evaluate((hash) => {
    window.location.hash = hash;
  }, hash);
  return rendered(page, view, before);
}

/// Runs the input's `command` (argv) as another process beside the page, with the test's
/// HOME; its stdout.
export function runCommand(input) {
  const [program, ...args] = input.command;
  return execFileSync(program, args, {
    encoding: "utf8",
    env: { ...process.env, HOME: input.home, NO_COLOR: "1" },
  });
}

/// The `#/worktree/<path>` address of a worktree's timeline.
export function timelineHash(path) {
  return `#/worktree/${encodeURIComponent(path)}`;
}

/// The `#/...` address of a view, on the page's origin.
export function at(input, hash) {
  return new URL(hash, input.url).toString();
}

/// Runs `scenario(input, browser)` with the input from CAIRN_UI_INPUT, prints its result
/// as JSON, closes the browser; exit 1 with the reason when anything fails.
export async function run(scenario, { flags = [] } = {}) {
  const input = JSON.parse(process.env.CAIRN_UI_INPUT || "{}");
  let browser;
  try {
    browser = await launch(flags);
    const result = await scenario(input, browser);
    process.stdout.write(`${JSON.stringify(result ?? {})}\n`);
    await browser.close();
    process.exit(0);
  } catch (error) {
    process.stderr.write(`${error.stack || error}\n`);
    if (browser) await browser.close().catch(() => {});
    process.exit(1);
  }
}
