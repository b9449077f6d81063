// The guard seen from a browser: without the token, from a host name that is not the
// ui's own (DNS rebinding), and from a page on another origin.

import { createServer } from "node:http";
import { elements, newPage, open, rendered, run } from "./harness.mjs";

/// `requests` once it holds `count` (network events arrive after the fetches settle).
async function settled(page, requests, count) {
  const deadline = Date.now() + 10_000;
  while (requests.length < count && Date.now() < deadline) await page.waitForTimeout(50);
  return [...requests].sort((a, b) => `${a.path}${a.token}`.localeCompare(`${b.path}${b.token}`));
}

/// A site of its own on loopback, reached as evil.test (the launch's resolver rules), so
/// the browser treats it as another site in the same address space as the ui.
async function foreignSite() {
  const server = createServer((_, response) => {
    response.setHeader("content-type", "text/html");
    response.end("<!doctype html><title>elsewhere</title><p>another site</p>");
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { server, origin: `http://evil.test:${server.address().port}` };
}

run(
  async (input, browser) => {
    const out = {};

    // Without the token: what the page shows and what a data route answers.
    const bare = await newPage(browser, { allow: [/401/] });
    const response = await bare.goto(input.bare);
    out.without = {
      status: response.status(),
      text: await bare.innerText("body"),
      rows: (await elements(bare, "worktree-row")).length,
      fetch: await bare.evaluate(async () => {
        const answer = await fetch("/v1/worktree_list", {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: "{}",
        });
        return { status: answer.status, body: await answer.text() };
      }),
    };

    // With it. No cookie: a cookie of 127.0.0.1 would go to every port of it.
    const page = await newPage(browser, { allow: [/401/] });
    await open(page, input.url, "worktrees");
    out.with = {
      rows: await elements(page, "worktree-row"),
      cookies: (await page.context().cookies()).map(({ name }) => name),
      address: page.url(),
    };

    // A reload: the address bar has lost the token, `/` answers 401, and the page opens
    // itself again with the token this tab holds.
    const reopened = page.waitForResponse(
      (r) => r.request().isNavigationRequest() && r.url().includes("token="),
    );
    const reload = await page.reload();
    out.reload = { first: reload.status(), again: (await reopened).status() };
    await rendered(page, "worktrees");
    out.reload.rows = (await elements(page, "worktree-row")).length;

    // A tab keeping a token the ui does not take (an earlier `cairn ui`'s): the page tries
    // it once, then says where to get the URL. No loop.
    const stale = await newPage(browser, { allow: [/401/] });
    await stale.goto(input.bare);
    await stale.evaluate(() => sessionStorage.setItem("cairn-ui-token", "stale"));
    const documents = [];
    stale.on("response", (r) => {
      if (r.request().isNavigationRequest()) documents.push(r.status());
    });
    await stale.goto(input.bare);
    // Long enough for many rounds of a loop, had there been one.
    await stale.waitForTimeout(1500);
    out.stale = { documents, text: await stale.innerText("body") };

    // DNS rebinding: rebind.test resolves to 127.0.0.1 (the launch's resolver rules).
    const rebound = await newPage(browser, { allow: [/403/] });
    const answer = await rebound.goto(`http://rebind.test:${input.port}/?token=${input.token}`);
    out.rebound = {
      status: answer.status(),
      text: await rebound.innerText("body"),
      rows: (await elements(rebound, "worktree-row")).length,
    };

    // A page on another origin in the browser that has the ui open: it reads the worktree
    // list (with the leaked token, then without it) and posts a rewind. Chromium hides the ui's answers from that page (and from playwright: opaque
    // responses are blocked), but not their status.
    const ui = input.bare.replace(/\/$/, "");
    const statuses = (page, requests) =>
      page.on("response", (response) => {
        const request = response.request();
        if (!request.url().startsWith(ui)) return;
        requests.push({
          path: new URL(request.url()).pathname,
          token: request.url().includes("token="),
          status: response.status(),
        });
      });
    const send = ({ ui, token, rewind }) => {
      const post = (path, body) =>
        fetch(`${ui}${path}`, { method: "POST", mode: "no-cors", credentials: "include", body });
      return Promise.all([
        post(`/v1/worktree_list?token=${token}`, "{}"),
        post("/v1/worktree_list", "{}"),
        post(`/v1/rewind?token=${token}`, JSON.stringify(rewind)),
      ]).then(() => null);
    };
    const inputs = { ui, token: input.token, rewind: { ...input.rewind, dry_run: true } };

    // The same requests from the ui's own page, to tell the Origin apart (a dry run: it
    // changes nothing).
    const own = [];
    statuses(page, own);
    await page.evaluate(send, inputs);
    out.own = await settled(page, own, 3);

    const site = await foreignSite();
    const foreign = await page.context().newPage();
    await foreign.goto(`${site.origin}/`);
    const requests = [];
    statuses(foreign, requests);
    out.foreign = await foreign.evaluate(
      async ({ ui, token }) => {
        const seen = { read: null, errors: [] };
        // A read the browser would hand the page only if the ui allowed it (CORS).
        try {
          const answer = await fetch(`${ui}/v1/worktree_list?token=${token}`, {
            method: "POST",
            body: "{}",
          });
          seen.read = await answer.text();
        } catch (error) {
          seen.errors.push(String(error));
        }
        return seen;
      },
      { ui, token: input.token },
    );
    await foreign.evaluate(send, { ...inputs, rewind: input.rewind });
    out.foreign.requests = await settled(foreign, requests, 3);
    out.foreign.origin = site.origin;
    site.server.close();
    return out;
  },
  { flags: ["--host-resolver-rules=MAP rebind.test 127.0.0.1, MAP evil.test 127.0.0.1"] },
);
