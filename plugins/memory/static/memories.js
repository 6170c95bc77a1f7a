// The memories table and the review inbox poll every 5 s; this says when a
// poll of one would not destroy something the operator is doing there:
// unsaved work (an open edit, a reason typed for a rejection) or a selection
// for a bulk action. Focus on a control inside (a slider being moved) holds
// the polls too: that is the shared app/static/polling.js (data-poll-holds-focus).
var POLLED = ["memory-table", "memory-inbox"];

function unsavedWork(block) {
  if (block.querySelector("tr.editing")) return true;
  var reasons = block.querySelectorAll("input[name=reason]");
  for (var i = 0; i < reasons.length; i++) {
    if (reasons[i].value) return true;
  }
  return false;
}

function memoriesIdle(id) {
  var block = document.getElementById(id || "memory-table");
  if (!block || unsavedWork(block)) return false;
  return !block.querySelector("input[name=ids]:checked");
}

// Polls wait while the operator is busy with the block, and a refresh after
// a change elsewhere waits while it holds unsaved work. (Decided here, not
// in hx-trigger filters: those need eval, which the pages' CSP forbids.)
document.addEventListener("htmx:beforeRequest", function (evt) {
  var elt = evt.detail.elt;
  if (!elt || POLLED.indexOf(elt.id) < 0) return;
  var config = evt.detail.requestConfig;
  var busy = config && config.triggeringEvent ? unsavedWork(elt) : !memoriesIdle(elt.id);
  if (busy) evt.preventDefault();
});

// The table's refresh after a change (not a poll) asks for the last page
// should its own be past it now: the change deleted its last rows (a Delete,
// a bulk delete), and an empty page would be left (plugins/memory/views.py).
document.addEventListener("htmx:configRequest", function (evt) {
  if (evt.detail.elt.id === "memory-table" && evt.detail.triggeringEvent) evt.detail.parameters.past_end = "last";
});

// "Select all shown" ticks or clears every row's box.
document.addEventListener("change", function (evt) {
  if (!evt.target.matches("#memory-table input[data-select-all]")) return;
  document.querySelectorAll("#memory-table input[name=ids]").forEach(function (box) {
    box.checked = evt.target.checked;
  });
});

// And it says what the rows' boxes say: ticked once every one is, half ticked
// (mixed) while only some are. Left ticked after a row's box was cleared, it
// told a screen reader that every row was selected when one was not.
function followRows() {
  var all = document.querySelector("#memory-table input[data-select-all]");
  if (!all) return;
  var boxes = document.querySelectorAll("#memory-table input[name=ids]").length;
  var ticked = document.querySelectorAll("#memory-table input[name=ids]:checked").length;
  all.checked = ticked > 0 && ticked === boxes;
  all.indeterminate = ticked > 0 && ticked < boxes;
}

document.addEventListener("change", function (evt) {
  if (evt.target.matches("#memory-table input[name=ids]")) followRows();
});

// A row's own buttons (Pin, Approve, a confidence, an edit saved) redraw it
// with its box cleared, and Delete takes it away: no change event says so.
document.addEventListener("htmx:afterSettle", followRows);

// A confidence slider shows its value while it moves.
document.addEventListener("input", function (evt) {
  if (!evt.target.matches("#memory-table td.confidence input[type=range]")) return;
  var output = evt.target.nextElementSibling;
  if (output) output.textContent = Number(evt.target.value).toFixed(2);
});

// A memory was added: empty the form for the next one (on an error the form
// keeps what was typed, and the error shows above the table).
document.addEventListener("memory-added", function () {
  var form = document.getElementById("memory-add");
  if (form) form.reset();
});

// An action of the operator's in the block still on its way (htmx marks the
// control that sent it): an edit form being fetched, say.
function actionOnItsWay(block) {
  return !!block.querySelector(".htmx-request");
}

// A refresh that was already on its way when the operator started working
// must not land on top of that: by the rules above, as they stand when it
// arrives (a poll while the block is busy, any refresh over unsaved work),
// nor, if it is the block's own refresh, over an action of theirs not yet
// answered: it would replace the row that answer is for, and the answer
// (the edit form asked for) would be lost. Their action brings the next
// refresh, or the polls do once they are done.
document.addEventListener("htmx:beforeSwap", function (evt) {
  var config = evt.detail.requestConfig;
  var target = evt.detail.target;
  if (!target || POLLED.indexOf(target.id) < 0 || !config) return;
  var busy = config.triggeringEvent ? unsavedWork(target) : !memoriesIdle(target.id);
  if (busy || (config.elt === target && actionOnItsWay(target))) {
    evt.detail.shouldSwap = false;
  }
  // A filter or page asked for before the edit was opened: said, as below.
  if (busy && askedOfTable(config.elt, target)) refuseOverEdit(config.elt, target);
});

// A filter or another page of the table that the operator asks for (the
// filter form, a pager button) while an edit is open is refused at once, and
// said to be. Swapped in, it would take the edit away with the old table;
// dropped when it lands (as a poll is), it left the filter showing a value the
// table did not, the address unchanged, and a poll after the edit applying it
// without a word. The filter is put back to what the table shows.
function askedOfTable(control, block) {
  return !!control && !!block && block.id === "memory-table" && control !== block;
}

function refuseOverEdit(control, block) {
  var what = control.id === "memory-filters" ? "filtering" : "turning the page";
  var said = showMemoryError("Save or cancel the open edit before " + what + ".");
  if (said) said.setAttribute("data-refused-over-edit", "");
  putFiltersBack(block);
}

// The table carries the filters it was drawn with (_table.html, data-filters).
function putFiltersBack(block) {
  var form = document.getElementById("memory-filters");
  var shown = JSON.parse(block.getAttribute("data-filters") || "{}");
  if (!form) return;
  Array.prototype.forEach.call(form.elements, function (field) {
    if (field.name && Object.prototype.hasOwnProperty.call(shown, field.name)) field.value = shown[field.name];
  });
}

// Refused before it is sent; once one is sent, a refusal said for an earlier one is out of date.
document.addEventListener("htmx:beforeRequest", function (evt) {
  var block = evt.detail.target;
  if (!askedOfTable(evt.detail.elt, block)) return;
  if (unsavedWork(block)) {
    evt.preventDefault();
    refuseOverEdit(evt.detail.elt, block);
    return;
  }
  var refusal = document.querySelector("#memory-errors [data-refused-over-edit]");
  if (refusal) refusal.remove();
});

// A memory was approved, rejected, saved, pinned or deleted: an error shown
// for an earlier attempt is out of date.
function clearMemoryErrors() {
  var errors = document.getElementById("memory-errors");
  if (errors) errors.innerHTML = "";
}
document.addEventListener("memory-reviewed", clearMemoryErrors);
document.addEventListener("memory-saved", clearMemoryErrors);

// What an action on the memories page came to, above the table (it sticks to
// the top of the window: style.css).
function showMemoryError(text) {
  var errors = document.getElementById("memory-errors");
  if (!errors) return null;
  errors.innerHTML = "";
  var message = document.createElement("p");
  message.className = "flash flash-error";
  message.textContent = text;
  errors.appendChild(message);
  return message;
}

function onMemoriesPage() {
  return !!document.getElementById("memory-errors") && !!document.getElementById("memory-table");
}

// A row action on a memory that is gone (deleted in another tab, by the API
// or the CLI) answers 404: say so, take its row away, and refresh the table.
// The row goes first: an edit form open in it (its Save or Cancel answered
// 404) would otherwise hold back every refresh as unsaved work, which has
// nowhere to go now; focus moves to the next row (app/static/swaps.js). A refusal the
// service explains in plain text (a page out of date, the database
// unavailable, the login ended) is shown as it says. A failed poll is polling.js's to report;
// and after a server error (5xx) no refresh: it would fail the same way, and
// its own failure would ask for the next refresh at once.
document.addEventListener("htmx:responseError", function (evt) {
  if (!onMemoriesPage() || isPoll(evt.detail.requestConfig)) return;   // a poll: polling.js, loaded by the layout
  var xhr = evt.detail.xhr;
  var status = xhr.status;
  var explained = (status === 400 || status === 401 || status === 503)
    && (xhr.getResponseHeader("Content-Type") || "").indexOf("text/plain") === 0;
  var row = status === 404 && evt.detail.elt.closest && evt.detail.elt.closest("tbody > tr");
  if (row && POLLED.some(function (id) { var block = document.getElementById(id); return block && block.contains(row); })) {
    row.remove();
  }
  showMemoryError(status === 404
    ? "That memory no longer exists; the table has been refreshed."
    : explained ? xhr.responseText
    : "The request failed (HTTP " + status + "); see the service log.");
  // Not after a 401 either: the refresh would be refused the same way (the
  // layout's notice offers the login page; polling.js).
  if (status < 500 && status !== 401) htmx.trigger(document.body, "memories-changed");
});

// An action that never reached the service (restarting, the network down):
// nothing was done, and the operator must know it, not find out later.
document.addEventListener("htmx:sendError", function (evt) {
  if (!onMemoriesPage() || isPoll(evt.detail.requestConfig)) return;
  showMemoryError("Not done: the service did not answer (it may be restarting). Try again in a moment.");
});

// Text pasted past a field's maxlength is cut by the browser without a word,
// and the cut would be saved as if it were all: say how much was left out.
document.addEventListener("paste", function (evt) {
  var field = evt.target;
  if (!onMemoriesPage() || !field.matches || !field.matches("textarea[maxlength], input[maxlength]")) return;
  var pasted = evt.clipboardData ? evt.clipboardData.getData("text") : "";
  var replaced = (field.selectionEnd || 0) - (field.selectionStart || 0);
  var over = field.value.length - replaced + pasted.length - field.maxLength;
  if (field.maxLength < 0 || over <= 0) return;
  showMemoryError("The pasted text was cut at this field's limit of " + field.maxLength +
                  " characters: its last " + over + " were left out.");
});

// A bulk action with no memory ticked is said at once, before Delete asks
// whether to delete "the selected memories", and without a request.
document.addEventListener("htmx:confirm", function (evt) {
  if (!evt.detail.elt.closest || !evt.detail.elt.closest("#memory-bulk-bar")) return;
  if (document.querySelector("#memory-table input[name=ids]:checked")) return;
  evt.preventDefault();
  showMemoryError("Select at least one memory first.");
});

// Escape in a row being edited (the table's or the inbox's) cancels the edit,
// as its Cancel button does; focus then goes back to the row's Edit button
// (the row's data-refocus, app/static/swaps.js): a keyboard user keeps their place.
document.addEventListener("keydown", function (evt) {
  if (evt.key !== "Escape" || !evt.target.closest) return;
  var editing = evt.target.closest("tr.editing");
  var cancel = editing && editing.querySelector("button.cancel");
  if (!cancel) return;
  evt.preventDefault();
  cancel.click();
});

// Enter in a one-line field of a row does what a form's Enter does: in an
// edit (the service) it saves, as the row's Save button does; in a reason
// for rejecting, it rejects. So does Enter in the bulk bar's confidence: it
// sets the selected memories' confidence, as the button beside it does. The
// rows and the bar are not forms (a form cannot hold a table row's cells, and
// the bar sends the table's boxes), so the browser does none of it by itself.
// A text box (the observation) keeps Enter for itself.
document.addEventListener("keydown", function (evt) {
  if (evt.key !== "Enter" || evt.isComposing || evt.shiftKey || evt.ctrlKey || evt.altKey || evt.metaKey) return;
  var field = evt.target;
  if (field.tagName !== "INPUT" || ["text", "number", "search"].indexOf(field.type) < 0) return;
  if (!field.closest("#memory-table, #memory-inbox, #memory-bulk-bar")) return;
  var reject = field.name === "reason" && field.closest(".reject-with-reason");
  var bulk = field.name === "bulk_confidence" && field.closest(".bulk-confidence");
  var editing = field.closest("tr.editing");
  var button = reject ? reject.querySelector("button.reject") : bulk ? bulk.querySelector("button")
    : editing && editing.querySelector("button.save");
  if (!button) return;
  evt.preventDefault();
  button.click();
});
