// `#/checks/<snapshot>`: the checks recorded of a snapshot's tree (every run, newest
// first), and `#/checks/<snapshot>/<name>`: the recorded output of that check's newest run.

import { href, html, shortId, snapshotLink } from "../dom.js";

export const viewName = ({ check }) => (check ? "check-log" : "checks");
export const title = ({ snapshot, check }) =>
  check ? `${check} of ${shortId(snapshot)}` : `checks of ${shortId(snapshot)}`;

function duration(ms) {
  return ms < 1000 ? `${ms} ms` : `${(ms / 1000).toFixed(1)} s`;
}

/** A run's result as a badge. */
function result(run) {
  return html`<span class="badge ${run.passed ? "ok" : "bad"}">${run.passed ? "passed" : "failed"}</span>`;
}

function row(snapshot, c) {
  return html`<tr data-test="check-row" data-check="${c.check}" data-passed="${String(c.passed)}"
      data-attestation="${c.attestation}">
    <th scope="row"><a data-test="check-log-link" href="${href("checks", snapshot, c.check)}">${c.check}</a></th>
    <td>${result(c)}
      ${c.timed_out ? html`<span class="badge bad">timed out</span>` : ""}</td>
    <td class="num-col">${c.exit_code}</td>
    <td class="num-col">${duration(c.duration_ms)}</td>
    <td><time datetime="${c.started}">${c.started}</time></td>
    <td>${c.host}</td>
    <td><code>${c.command.join(" ")}</code></td>
    <td>${c.signed_by ? html`<code title="${c.signed_by}">${c.signed_by.slice(0, 19)}…</code>` : html`<span class="muted">unsigned</span>`}</td>
  </tr>`;
}

function output(name, text, cut) {
  return html`<h2>${name}</h2>${
    text
      ? html`<pre class="log" data-test="check-${name}">${text}</pre>`
      : html`<pre class="log empty" data-test="check-${name}"></pre><p class="muted">(empty)</p>`
  }${cut ? html`<p class="note">Cut at 16 MiB.</p>` : ""}`;
}

export async function render(view) {
  const { snapshot, check } = view.params;
  const outcome = await view.data;
  if (!view.current()) return;
  const head = html`<p class="meta">Of ${snapshotLink(outcome.snapshot)}
    (tree <code>${shortId(outcome.tree)}</code>)</p>`;
  if (check) {
    const log = outcome.log;
    const run = outcome.checks.find((c) => c.attestation === log.attestation);
    view.main.innerHTML = String(html`<h1>Check <code>${check}</code></h1>${head}
      <p><a href="${href("checks", snapshot)}">All checks of this snapshot</a></p>
      <section class="check-log" data-test="check-log" data-check="${check}">
        ${run ? html`<p>Newest run: ${result(run)}
          exit ${run.exit_code}, ${duration(run.duration_ms)}, <code>${run.command.join(" ")}</code></p>` : ""}
        ${output("stdout", log.stdout, log.stdout_cut)}
        ${output("stderr", log.stderr, log.stderr_cut)}
      </section>`);
  } else {
    view.main.innerHTML = String(html`<h1>Checks</h1>${head}${
      outcome.checks.length
        ? html`<table class="list"><thead><tr><th scope="col">Check</th><th scope="col">Result</th>
            <th scope="col">Exit</th><th scope="col">Took</th><th scope="col">Started</th>
            <th scope="col">Host</th><th scope="col">Command</th><th scope="col">Signed by</th></tr></thead>
            <tbody>${outcome.checks.map((c) => row(snapshot, c))}</tbody></table>`
        : html`<p class="empty">No checks are recorded of this snapshot's files:
            <code>cairn verify</code> runs and records them.</p>`
    }`);
  }
  view.done();
}
