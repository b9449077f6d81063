// On the page `/` answers without its token: a tab that was given the token (a reload
// after the page took it out of the address bar) opens the page again with it.
import { token } from "./api.js";

if (token) {
  location.replace(`/?token=${encodeURIComponent(token)}${location.hash}`);
}
