// Polled blocks marked data-poll-holds-focus wait while keyboard focus is
// inside them (:focus-visible): a swap replaces the focused link or control,
// and focus falls back to <body>, so a keyboard user would lose their place
// every poll.
// Only polls wait (they have no triggering event); a refresh the page asks
// for, a filter or a pager link, still runs. (Decided here, not in
// hx-trigger filters: those need eval, which the pages' CSP forbids.)
// A block whose last poll failed is not held: it shows what may be out of
// date, and only its own poll, answered, says it is not (and clears the
// banner below); focus goes back where it was after the swap (swaps.js).
// Focus a mouse click left on a button holds nothing: the block goes on
// showing what changes (swaps.js restores only keyboard focus, too). A
// control the pointer still presses (a slider being dragged) holds it.
function pollHeld(block) {
  var active = document.activeElement;
  return !!block && block.hasAttribute("data-poll-holds-focus") && block.contains(active)
    && (active.matches(":focus-visible") || active === pressed) && failingPolls.indexOf(block) < 0;
}

var pressed = null;   // what the pointer pressed, until it lets go
document.addEventListener("pointerdown", function (evt) { pressed = evt.target; }, true);
["pointerup", "pointercancel"].forEach(function (type) {
  document.addEventListener(type, function () { pressed = null; }, true);
});

function isPoll(config) {
  return !!config && !config.triggeringEvent;
}

document.addEventListener("htmx:beforeRequest", function (evt) {
  if (isPoll(evt.detail.requestConfig) && pollHeld(evt.detail.elt)) evt.preventDefault();
});

// A poll already on its way when focus moved into the block is not swapped in.
document.addEventListener("htmx:beforeSwap", function (evt) {
  if (isPoll(evt.detail.requestConfig) && pollHeld(evt.detail.target)) evt.detail.shouldSwap = false;
});

// A poll that fails (the service restarting, the database unavailable) leaves
// its block as it was, and htmx goes on polling: say that what the page shows
// may be out of date, until every block whose poll failed has been answered
// again (a page polls several blocks; one answered says nothing of the
// others). Only polls: what an operator's own action met, the page that sent
// it says (memories.js).
var OUT_OF_DATE = ": what this page shows may be out of date. Trying again every few seconds.";
var failingPolls = [];   // the blocks whose last poll failed

function pollFailed(block, message) {
  if (failingPolls.indexOf(block) < 0) failingPolls.push(block);
  var banner = document.getElementById("poll-trouble");
  if (banner && banner.textContent !== message) {   // said once, not again at every failed poll
    banner.removeAttribute("data-login");   // the next refusal for want of a login says so again
    banner.textContent = message;
    banner.hidden = false;
  }
}

function pollAnswered(block) {
  // A block gone from the page (replaced by a swap) polls no more.
  failingPolls = failingPolls.filter(function (b) { return b !== block && document.body.contains(b); });
  var banner = document.getElementById("poll-trouble");
  if (banner && failingPolls.length === 0 && !banner.hidden) {
    banner.hidden = true;
    banner.textContent = "";
  }
}

document.addEventListener("htmx:sendError", function (evt) {
  var config = evt.detail.requestConfig;
  if (isPoll(config)) pollFailed(config.elt, "Lost contact with the service" + OUT_OF_DATE);
});

document.addEventListener("htmx:responseError", function (evt) {
  var config = evt.detail.requestConfig;
  if (!isPoll(config) || loginPageOf(evt.detail.xhr)) return;   // a login that ended: said below
  var status = evt.detail.xhr.status;
  pollFailed(config.elt, (status === 503 ? "The service or its database is unavailable just now"
    : "The service answered HTTP " + status + " (the service log says why)") + OUT_OF_DATE);
});

document.addEventListener("htmx:afterRequest", function (evt) {
  var config = evt.detail.requestConfig;
  if (evt.detail.successful) useCsrfToken(evt.detail.xhr.getResponseHeader("X-CSRFToken"));
  if (evt.detail.successful) loginAnswered();
  if (isPoll(config) && evt.detail.successful) pollAnswered(config.elt);
});

// A request refused because the login has ended (it expired, or Log out was
// pressed in another tab), poll or action, leaves the page as it is: sending
// the tab to the login page would throw away whatever is half typed in it.
// The page says so and offers the login page in a new tab; once logged in
// there, the next poll here is answered and the notice goes.
var loggedOut = false;

function loginPageOf(xhr) {
  return xhr && xhr.status === 401 ? xhr.getResponseHeader("X-Claudeops-Login") : null;
}

document.addEventListener("htmx:responseError", function (evt) {
  var login = loginPageOf(evt.detail.xhr);
  if (!login) return;
  loggedOut = true;
  // The service answered: a block whose poll failed before is not failing now.
  var block = evt.detail.requestConfig && evt.detail.requestConfig.elt;
  failingPolls = failingPolls.filter(function (b) { return b !== block; });
  var banner = document.getElementById("poll-trouble");
  if (!banner || banner.hasAttribute("data-login")) return;   // said already
  banner.setAttribute("data-login", "");
  banner.textContent = "Your login has ended: nothing on this page is updated or saved until you log in " +
    "again. What you typed here stays. ";
  var link = document.createElement("a");
  link.href = login;
  link.target = "_blank";
  link.rel = "noopener";
  link.textContent = "Log in again in a new tab";
  banner.appendChild(link);
  banner.hidden = false;
});

function loginAnswered() {
  if (!loggedOut) return;
  loggedOut = false;
  var banner = document.getElementById("poll-trouble");
  if (banner && banner.hasAttribute("data-login")) {
    banner.removeAttribute("data-login");
    if (failingPolls.length === 0) {
      banner.hidden = true;
      banner.textContent = "";
    }
  }
}

// The current CSRF token, which every answer to htmx carries (app/auth.py):
// after a login in another tab, the one this page was drawn with no longer
// holds, and the half-typed form it still shows could not be sent.
function useCsrfToken(token) {
  if (!token) return;
  document.body.setAttribute("hx-headers", JSON.stringify({"X-CSRFToken": token}));
  document.querySelectorAll("input[name=csrf_token]").forEach(function (input) { input.value = token; });
}
