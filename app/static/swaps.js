// What an htmx swap does to a keyboard user, on every page (the layout loads it).
//
// Focus. A swap that replaces the element holding keyboard focus (a row
// redrawn after Pin, Save or a slider step; a row removed after Delete or
// Approve; a block after a pager link) drops focus to <body>, and the next
// Tab starts again at the top of the page. Focus goes back instead:
//   1. to the same control (tag, name, type and class; the same text first)
//      in what now carries the id of the element around it (the row);
//   2. else to what data-refocus (a selector, on the control or around it)
//      names there: the row's Edit button after its edit is saved or cancelled,
//      the observation's text box when Edit opens the form (its caret at the end);
//   3. else to the first control there;
//   4. where that element is gone, to the same control (or the data-refocus
//      one, or the first) of the row that followed it, else the one before;
//   5. else to the nearest element around it that is still there.
// A control with an id of its own htmx puts focus back on by itself.
//
// Answers out of turn. An answer that arrives while a request sent after it
// for the same element (the row) is still on its way is held back: swapped
// in, it would replace the element that later answer is for, which would then
// find its target gone and be dropped (Edit pressed while the row's slider
// step is being answered: the edit form never opened). The later answer, the
// newer, redraws the element itself; should it bring none (a refusal shown
// above the table, a failure), the held answer is swapped in then.
//
// Steps left behind. A slider stepped again while its last step is answered
// sends its later step from the redrawn row, where htmx would drop it.
//
// Announcements. Text a swapped-in block marks data-announce (a count of
// rows) is read out by the layout's live region when the swap answers the
// operator (a filter, a pager link, a refresh after a change), never a poll:
// a live region swapped in with its block is not reliably announced.
//
// Notices of the old address. What the page left out of its address (a level
// misspelt in a link: layout.html's data-ignored notices) is said until the
// operator chooses a filter or a page: the page then shows the address that
// swap pushed, and the notice no longer describes it. A poll pushes none.

var FOCUSABLE = "a[href], button:not([disabled]), input:not([type=hidden]):not([disabled]), " +
  "select:not([disabled]), textarea:not([disabled]), summary, [tabindex]:not([tabindex='-1'])";

// Not htmx's own classes: the control that sent the request has htmx-request until the swap.
function controlKey(elt) {
  var classes = Array.prototype.filter.call(elt.classList, function (c) { return c.indexOf("htmx-") !== 0; });
  return [elt.tagName, elt.getAttribute("name") || "", elt.getAttribute("type") || "", classes.join(" ")].join("|");
}

function focusables(scope) {
  return Array.prototype.filter.call(scope.querySelectorAll(FOCUSABLE), function (elt) {
    return elt.getClientRects().length > 0;
  });
}

function idsOf(elements) {
  var ids = [];
  for (var i = 0; i < elements.length; i++) if (elements[i].id) ids.push(elements[i].id);
  return ids;
}

function siblings(elt, forward) {
  var found = [];
  for (var s = forward ? elt.nextElementSibling : elt.previousElementSibling; s;
       s = forward ? s.nextElementSibling : s.previousElementSibling) found.push(s);
  return found;
}

function ancestors(elt) {
  var found = [];
  for (var a = elt.parentElement; a && a !== document.body; a = a.parentElement) found.push(a);
  return found;
}

// Where focus was, described by ids and kinds that survive the swap.
// A block that took focus itself (see restore) is its own holder.
function remember(active) {
  var holder = active.id ? active : active.parentElement && active.parentElement.closest("[id]");
  if (!holder) return null;
  var refocus = active.closest("[data-refocus]");
  return {
    holder: holder.id, key: controlKey(active), text: active.textContent.trim(),
    refocus: refocus ? refocus.getAttribute("data-refocus") : null,
    after: idsOf(siblings(holder, true)), before: idsOf(siblings(holder, false)),
    around: idsOf(ancestors(holder))
  };
}

function controlIn(scope, memo) {
  var same = focusables(scope).filter(function (elt) { return controlKey(elt) === memo.key; });
  var sameText = same.filter(function (elt) { return elt.textContent.trim() === memo.text; });
  var named = memo.refocus && scope.querySelector(memo.refocus);
  return sameText[0] || same[0] || named || focusables(scope)[0] || null;
}

function restore(memo) {
  var active = document.activeElement;
  if (active && active !== document.body) return;   // htmx (by id) or the operator has placed it
  var holder = document.getElementById(memo.holder);
  var target = holder && controlIn(holder, memo);
  var rows = memo.after.concat(memo.before);
  for (var i = 0; !holder && !target && i < rows.length; i++) {
    var row = document.getElementById(rows[i]);
    target = row && controlIn(row, memo);
  }
  var blocks = (holder ? [holder.id] : []).concat(memo.around);
  for (var j = 0; !target && j < blocks.length; j++) {
    var block = document.getElementById(blocks[j]);
    if (!block) continue;
    // A block left with no control (an emptied inbox) takes focus itself: its text says why.
    target = focusables(block)[0] || block;
    if (target === block && !block.hasAttribute("tabindex")) block.setAttribute("tabindex", "-1");
  }
  if (target) {
    target.focus();
    caretToEnd(target);
  }
}

// A text field focus is put in (the observation when Edit opens its form)
// has its caret at the end, as after a click past its text: what is typed
// at once is added to the text, not put before it (focus() leaves the caret
// at the start).
var CARET_TYPES = ["text", "search", "url", "tel"];

function caretToEnd(field) {
  var text = field.tagName === "TEXTAREA" || (field.tagName === "INPUT" && CARET_TYPES.indexOf(field.type) >= 0);
  if (text) field.setSelectionRange(field.value.length, field.value.length);
}

// Only focus the keyboard put there (:focus-visible; a button clicked with the
// mouse is not): focus inside a polled block holds its polls (polling.js), and
// after a click the block should go on showing what changes.
var pending = null;

function beforeSwap(evt) {
  if (evt.type === "htmx:beforeSwap" && holdBack(evt.detail)) return;
  var target = evt.detail.target;
  var active = document.activeElement;
  if (!target || !active || active === document.body || !target.contains(active)) return;
  if (!active.matches(":focus-visible")) return;
  var memo = remember(active);
  if (!memo) return;
  pending = memo;
}

// Focus goes back in the task that swapped, before a key pressed meanwhile
// is handled: new content answers keys only once htmx has settled it
// (afterSettle; the layout settles at once). A row removed brings nothing to
// settle, and a swap called off (shouldSwap = false) left focus where it
// was: both are done with when the response has been handled (afterOnLoad,
// in the same task). A swap given a settle delay of its own waits for it.
function restorePending() {
  if (!pending) return;
  var memo = pending;
  pending = null;
  restore(memo);
}

document.addEventListener("htmx:beforeSwap", beforeSwap);
document.addEventListener("htmx:oobBeforeSwap", beforeSwap);
document.addEventListener("htmx:afterSettle", restorePending);

document.addEventListener("htmx:afterOnLoad", function () {
  if (!pending) return;
  var focused = document.activeElement && document.activeElement !== document.body;
  if (focused || !document.getElementById(pending.holder)) restorePending();
});

// The requests on their way, each with its place in the order sent, and the
// answers held back. A request is on its way until its xhr's loadend, which
// comes once htmx has handled its answer (or failure), even where the control
// that sent it is gone from the page and its htmx events with it.
var requestsSent = 0;
var onItsWay = [];   // {xhr, target, place}
var heldBack = [];   // {detail: the answer's htmx:beforeSwap detail, place}

function placeOf(xhr) {
  for (var i = 0; i < onItsWay.length; i++) if (onItsWay[i].xhr === xhr) return onItsWay[i].place;
  return null;
}

function laterOnItsWay(target, place) {
  return onItsWay.some(function (request) { return request.target === target && request.place > place; });
}

function holdBack(detail) {
  var place = placeOf(detail.xhr);
  if (!detail.shouldSwap || place === null || !laterOnItsWay(detail.target, place)) return false;
  detail.shouldSwap = false;
  heldBack.push({detail: detail, place: place});
  return true;
}

// A request has ended: an answer held back for its element is dropped if the
// element was redrawn meanwhile, else swapped in once no later request for it is on its way.
document.addEventListener("htmx:beforeSend", function (evt) {
  var request = {xhr: evt.detail.xhr, target: evt.detail.target, place: ++requestsSent};
  var sent = valueSent(evt.detail);
  onItsWay.push(request);
  request.xhr.addEventListener("loadend", function () {
    onItsWay = onItsWay.filter(function (other) { return other !== request; });
    if (sent) sendWhatWasLeft(sent);
    var held = heldBack;
    heldBack = [];
    held.forEach(function (answer) {
      if (!document.body.contains(answer.detail.target)) return;
      if (laterOnItsWay(answer.detail.target, answer.place)) heldBack.push(answer);
      else swapHeldBack(answer.detail);
    });
  });
});

// A control used again while its request was on its way (a slider stepped
// twice): htmx queues the later request on the control, and drops it when the
// first answer redraws the element around it (htmx sends nothing from a
// control gone from the page). The later step was lost, and the redrawn
// slider showed the first. Instead the redrawn element's like control is set
// where the operator left the old one, and sends that.
function valueSent(detail) {
  var control = detail.elt;
  var target = detail.target;
  var config = detail.requestConfig;
  if (!control || !target || !target.id || !target.contains(control)) return null;
  if (["INPUT", "SELECT"].indexOf(control.tagName) < 0 || !config || !config.triggeringEvent) return null;
  return {control: control, value: control.value, key: controlKey(control), holder: target.id,
          trigger: config.triggeringEvent.type};
}

function sendWhatWasLeft(sent) {
  var old = sent.control;
  if (document.body.contains(old) || old.value === sent.value) return;   // htmx sends its queue itself
  var holder = document.getElementById(sent.holder);
  var like = holder && focusables(holder).filter(function (elt) { return controlKey(elt) === sent.key; })[0];
  if (!like || like.value === old.value) return;
  like.value = old.value;
  // What shows the value (an output beside it); for a control sent on input, also what sends it.
  like.dispatchEvent(new Event("input", {bubbles: true}));
  if (sent.trigger !== "input") htmx.trigger(like, sent.trigger);
}

// The swap htmx would have made of a held answer, once the page has been
// asked again (htmx:beforeSwap: a poll over focus, an edit open now, may decline it).
// Its swap style is kept, not its modifiers: the layout settles at once anyway.
function swapHeldBack(held) {
  var asked = new CustomEvent("htmx:beforeSwap", {bubbles: true, cancelable: true,
                                                  detail: Object.assign({}, held, {shouldSwap: true})});
  if (!held.target.dispatchEvent(asked) || !asked.detail.shouldSwap) return;
  var detail = asked.detail;
  var source = detail.requestConfig.elt;   // the control that sent it (detail.elt is the target)
  if (!document.body.contains(source)) source = null;
  var declared = (source || detail.target).closest("[hx-swap], [data-hx-swap]");
  var spec = detail.swapOverride || (declared && (declared.getAttribute("hx-swap") ||
                                                  declared.getAttribute("data-hx-swap")));
  var style = (spec || htmx.config.defaultSwapStyle).trim().split(/\s+/)[0];
  var events = source || document.body;
  htmx.swap(detail.target, detail.serverResponse, {swapStyle: style}, {
    eventInfo: detail, contextElement: source || detail.target,
    afterSwapCallback: function () { triggerFromHeader(detail.xhr, "HX-Trigger-After-Swap", events); },
    afterSettleCallback: function () { triggerFromHeader(detail.xhr, "HX-Trigger-After-Settle", events); }
  });
}

// What htmx does with an HX-Trigger-* header: a list of event names, or JSON
// naming each event with its detail.
function triggerFromHeader(xhr, header, elt) {
  var events = xhr.getResponseHeader(header);
  if (!events) return;
  if (events.trim().charAt(0) !== "{") {
    events.split(",").forEach(function (name) { htmx.trigger(elt, name.trim(), []); });
    return;
  }
  events = JSON.parse(events);
  Object.keys(events).forEach(function (name) {
    var value = events[name];
    htmx.trigger(elt, name, value !== null && typeof value === "object" ? value : {value: value});
  });
}

document.addEventListener("htmx:afterSwap", function (evt) {
  var config = evt.detail.requestConfig;
  var region = document.getElementById("announcer");
  if (!region || !config || !config.triggeringEvent || !evt.target.querySelector) return;
  var said = evt.target.querySelector("[data-announce]");
  if (!said) return;
  // Emptied first: the same words again (a refresh that changed no count) are still read.
  region.textContent = "";
  setTimeout(function () { region.textContent = said.textContent.trim(); }, 50);
});

document.addEventListener("htmx:pushedIntoHistory", function () {
  document.querySelectorAll("main [data-ignored]").forEach(function (notice) { notice.remove(); });
});

// A page loaded after a form was sent (Run now, Stop, Save changes, Import)
// says what came of it at the top of <main>: focus goes there, or to the
// first field the form refused, so it is read at once and the next Tab goes
// on from there instead of through the sidebar.
document.addEventListener("DOMContentLoaded", function () {
  var refused = document.querySelector("main [aria-invalid=true]");
  var flash = document.querySelector("main [data-flash]");
  var target = refused || flash;
  if (!target) return;
  if (target === flash) flash.setAttribute("tabindex", "-1");
  target.focus();
});
