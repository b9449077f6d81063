// The token of the URL `cairn ui` printed, kept for this tab in sessionStorage.

const KEY = "cairn-ui-token";

/** Takes the token out of the address bar into the tab's keeping; the tab's token, or
 * null. */
export function takeToken() {
  const url = new URL(window.location.href);
  const given = url.searchParams.get("token");
  if (given) {
    sessionStorage.setItem(KEY, given);
    url.searchParams.delete("token");
    history.replaceState(null, "", url.pathname + url.search + url.hash);
  }
  return tabToken();
}

/** The token this tab keeps, or null. */
export function tabToken() {
  return sessionStorage.getItem(KEY);
}
