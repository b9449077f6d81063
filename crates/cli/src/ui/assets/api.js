// The page's data: the engine's verbs at POST /v1/{verb}, and store changes at
// GET /v1/events. The token of the URL `cairn ui` printed is kept for this tab (a reload
// finds it again: `reopen.js`), dropped from the address bar, and sent with every call:
// as a header, or in the URL of the event stream (EventSource sends no headers).

import { takeToken } from "./token.js";

/** The token this tab was given, or null. */
export const token = takeToken();

/** A verb's error (`{"error": {code, message}}`), or a refusal (an outcome with a message
 * and a status that is not 2xx; `outcome` keeps it for the details). */
export class VerbError extends Error {
  constructor(code, message, outcome = null) {
    super(message);
    this.code = code;
    this.outcome = outcome;
  }
}

/** Calls `verb` with `args` (the body `cairn serve` takes) and returns its outcome. */
export async function call(verb, args = {}) {
  const headers = { "Content-Type": "application/json" };
  if (token) headers["X-Cairn-Token"] = token;
  let response;
  try {
    response = await fetch(`/v1/${verb}`, {
      method: "POST",
      headers,
      body: JSON.stringify(args),
    });
  } catch (e) {
    throw new VerbError("unreachable", `${verb}: cairn ui does not answer (${e.message})`);
  }
  let body = null;
  try {
    body = await response.json();
  } catch {
    throw new VerbError("bad_answer", `${verb}: HTTP ${response.status} without JSON`);
  }
  if (body && typeof body.error === "object" && body.error) {
    throw new VerbError(body.error.code, body.error.message);
  }
  if (!response.ok) {
    const message = body?.message ?? `${verb}: HTTP ${response.status}`;
    throw new VerbError("refused", message, body);
  }
  return body;
}

/** Calls `onChange()` for each store change the server reports; `onState(state)` as the
 * stream opens ("open"), drops ("reconnecting": EventSource tries again by itself) or is
 * refused for good ("closed", e.g. a token of an earlier `cairn ui`). */
export function watchStore(onChange, onState) {
  const url = token ? `/v1/events?token=${encodeURIComponent(token)}` : "/v1/events";
  const source = new EventSource(url);
  source.addEventListener("store", () => onChange());
  source.addEventListener("open", () => onState("open"));
  source.addEventListener("error", () =>
    onState(source.readyState === EventSource.CLOSED ? "closed" : "reconnecting"),
  );
  return source;
}
