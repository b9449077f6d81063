// The guard seen from a browser: without the token, from a host name that is not the
// ui's own (DNS rebinding), and from a page on another origin.

import { elements, newPage, open, run } from "./harness.mjs";

const FOREIGN = "http://evil.test";

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

    // With it.
    const page = await newPage(browser);
    await open(page, input.url, "worktrees");
    out.with = {
      rows: await elements(page, "worktree-row"),
      cookies: (await page.context().cookies()).map(({ name, httpOnly, sameSite }) => ({
        name,
        httpOnly,
        sameSite,
      })),
    };

    // DNS rebinding: rebind.test resolves to 127.0.0.1 (the launch's resolver rules).
    const rebound = await newPage(browser, { allow: [/403/] });
    const answer = await rebound.goto(`http://rebind.test:${input.port}/?token=${input.token}`);
    out.rebound = {
      status: answer.status(),
      text: await rebound.innerText("body"),
      rows: (await elements(rebound, "worktree-row")).length,
    };

    // A page on another origin in the browser that holds the ui's cookie: it reads the
    // worktree list (with the leaked token, then with the cookie alone) and posts a rewind.
    const foreign = await page.context().newPage();
    await foreign.route(`${FOREIGN}/**`, (route) =>
      route.fulfill({ contentType: "text/html", body: "<!doctype html><title>elsewhere</title>" }),
    );
    await foreign.goto(`${FOREIGN}/`);
    const ui = input.bare.replace(/\/$/, "");
    const requests = [];
    // What the ui answered each request, as the network saw it (the foreign page itself
    // may be denied the answer).
    foreign.on("response", async (response) => {
      const request = response.request();
      if (!request.url().startsWith(ui)) return;
      requests.push({
        url: request.url(),
        origin: (await request.allHeaders()).origin ?? null,
        token: request.url().includes("token="),
        status: response.status(),
      });
    });
    out.foreign = await foreign.evaluate(
      async ({ ui, token, rewind }) => {
        const seen = { read: null, errors: [] };
        const read = async (url) => {
          try {
            const answer = await fetch(url, { method: "POST", body: "{}", credentials: "include" });
            seen.read = await answer.text();
          } catch (error) {
            seen.errors.push(String(error));
          }
        };
        await read(`${ui}/v1/worktree_list?token=${token}`);
        await read(`${ui}/v1/worktree_list`);
        await fetch(`${ui}/v1/rewind?token=${token}`, {
          method: "POST",
          mode: "no-cors",
          credentials: "include",
          body: JSON.stringify(rewind),
        });
        return seen;
      },
      { ui, token: input.token, rewind: input.rewind },
    );
    // The network events of the three requests arrive after the fetches settle.
    const deadline = Date.now() + 10_000;
    while (requests.length < 3 && Date.now() < deadline) await foreign.waitForTimeout(50);
    out.foreign.requests = requests;
    return out;
  },
  { flags: ["--host-resolver-rules=MAP rebind.test 127.0.0.1"] },
);
