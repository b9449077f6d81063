// `#/file/<snapshot>/<path>`: a file as a snapshot holds it (show with contents),
// highlighted after it is shown.

import { bytes, fromBase64, html, isBinary, shortId, snapshotLink } from "../dom.js";
import { highlightLines } from "../syntax.js";

export const viewName = () => "file";
export const title = ({ snapshot, path }) => `${path} at ${shortId(snapshot)}`;

export async function render(view) {
  const { snapshot, path } = view.params;
  const shown = await view.data;
  if (!view.current()) return;
  const data = fromBase64(shown.contents);
  const head = html`<h1><code class="path">${path}</code></h1>
    <p class="meta">At ${snapshotLink(snapshot)}
      · ${bytes(shown.size)} · blob <code>${shortId(shown.blob)}</code></p>`;
  if (isBinary(data)) {
    view.main.innerHTML = String(html`${head}<p class="note" data-test="file-binary"
      data-size="${shown.size}">Binary file, ${bytes(shown.size)}.</p>`);
    view.done();
    return;
  }
  const text = new TextDecoder().decode(data);
  const lines = text.split("\n");
  // A final line end ends the last line; it does not start another.
  if (lines.length > 1 && lines[lines.length - 1] === "") lines.pop();
  view.main.innerHTML = String(html`${head}<div class="source">
    <pre class="gutter" aria-hidden="true">${lines.map((_, i) => `${i + 1}\n`).join("")}</pre>
    <pre class="code"><code data-test="file-content" data-path="${path}" data-snapshot="${snapshot}"></code></pre>
  </div>`);
  const code = view.main.querySelector("[data-test=file-content]");
  code.textContent = text;
  view.done();
  const highlighted = await highlightLines(path, text.split("\n"));
  if (highlighted && view.current()) code.innerHTML = highlighted.join("\n");
}

// A file at a snapshot never changes.
export async function refresh() {}
