// On the page `/` answers without a valid token: a tab that keeps a token (a reload after
// the page took it out of the address bar) opens the page again with it, once. If the
// address has a token already, it was refused (one of an earlier `cairn ui`): stay.
import { tabToken } from "./token.js";

const token = tabToken();
if (token && !new URL(location.href).searchParams.has("token")) {
  location.replace(`/?token=${encodeURIComponent(token)}${location.hash}`);
}
