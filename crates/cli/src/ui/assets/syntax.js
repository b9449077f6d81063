// Syntax highlighting with the vendored highlight.js and its light and dark themes (all
// loaded on first use, so no first render waits for them), line by line: a text is
// highlighted whole, then cut into lines with each line's open spans closed and reopened,
// so a construct spanning lines (a block comment) keeps its colour.

let loading = null;

const THEMES = [
  ["/assets/vendor/github.min.css", "(prefers-color-scheme: light)"],
  ["/assets/vendor/github-dark.min.css", "(prefers-color-scheme: dark)"],
];

function hljs() {
  if (!loading) {
    for (const [href, media] of THEMES) {
      const link = document.createElement("link");
      link.rel = "stylesheet";
      link.href = href;
      link.media = media;
      document.head.append(link);
    }
    loading = import("./vendor/highlight.min.js").then((m) => m.default);
  }
  return loading;
}

// Names highlight.js does not know by extension alone.
const BY_NAME = {
  Makefile: "makefile",
  "Cargo.lock": "ini",
  Dockerfile: "bash",
};

/** The language of `path` by its name or extension, or null. */
function language(hl, path) {
  const name = path.slice(path.lastIndexOf("/") + 1);
  if (BY_NAME[name]) return BY_NAME[name];
  const dot = name.lastIndexOf(".");
  if (dot <= 0) return null;
  const ext = name.slice(dot + 1).toLowerCase();
  return hl.getLanguage(ext) ? ext : null;
}

/** Highlighted HTML cut into lines; every line is balanced (its spans closed). */
export function splitLines(highlighted) {
  const out = [];
  const open = [];
  let line = "";
  for (const m of highlighted.matchAll(/(<span[^>]*>)|(<\/span>)|(\n)|([^<\n]+)/g)) {
    if (m[1]) {
      open.push(m[1]);
      line += m[1];
    } else if (m[2]) {
      open.pop();
      line += m[2];
    } else if (m[3]) {
      out.push(line + "</span>".repeat(open.length));
      line = open.join("");
    } else {
      line += m[4];
    }
  }
  out.push(line);
  return out;
}

/** Past this many characters a text is shown plain: highlighting it would stall the page. */
const MOST = 400_000;

/**
 * `lines` (text without line ends) of `path` highlighted: one HTML string per line, or
 * null when the language is unknown or the text too long.
 */
export async function highlightLines(path, lines) {
  const hl = await hljs();
  const lang = language(hl, path);
  if (!lang) return null;
  const text = lines.join("\n");
  if (text.length > MOST) return null;
  const { value } = hl.highlight(text, { language: lang, ignoreIllegals: true });
  return splitLines(value);
}
