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
