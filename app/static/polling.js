// Polled blocks marked data-poll-holds-focus wait while keyboard focus is
// inside them: a swap replaces the focused link or control, and focus falls
// back to <body>, so a keyboard user would lose their place every poll.
// Only polls wait (they have no triggering event); a refresh the page asks
// for, a filter or a pager link, still runs. (Decided here, not in
// hx-trigger filters: those need eval, which the pages' CSP forbids.)
function pollHeld(block) {
  return !!block && block.hasAttribute("data-poll-holds-focus") && block.contains(document.activeElement);
}

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
// the page as it was, and htmx goes on polling: say that what the page shows
// may be out of date, until a poll succeeds again. Only polls: what an
// operator's own action met, the page that sent it says (memories.js).
var OUT_OF_DATE = ": what this page shows may be out of date. Trying again every few seconds.";

function pollTrouble(message) {
  var banner = document.getElementById("poll-trouble");
  if (!banner) return;
  if (message === null) {
    banner.hidden = true;
    banner.textContent = "";
  } else if (banner.textContent !== message) {   // said once, not again at every failed poll
    banner.textContent = message;
    banner.hidden = false;
  }
}

document.addEventListener("htmx:sendError", function (evt) {
  if (isPoll(evt.detail.requestConfig)) pollTrouble("Lost contact with the service" + OUT_OF_DATE);
});

document.addEventListener("htmx:responseError", function (evt) {
  if (!isPoll(evt.detail.requestConfig)) return;
  var status = evt.detail.xhr.status;
  pollTrouble((status === 503 ? "The service or its database is unavailable just now"
    : "The service answered HTTP " + status + " (the service log says why)") + OUT_OF_DATE);
});

document.addEventListener("htmx:afterRequest", function (evt) {
  if (isPoll(evt.detail.requestConfig) && evt.detail.successful) pollTrouble(null);
});
