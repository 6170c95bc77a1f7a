// The memories table polls every 5 s; this says when a poll would not destroy
// something the operator is doing: an open inline edit, a selection for a bulk
// action, or focus on a control inside the table (say, a slider being moved).
function memoriesIdle() {
  var table = document.getElementById("memory-table");
  if (!table) return false;
  if (table.querySelector("tr.editing")) return false;
  if (table.querySelector("input[name=ids]:checked")) return false;
  return !table.contains(document.activeElement);
}

// The table's polls wait while the operator is busy with it, and a refresh
// after a change elsewhere waits while a row is being edited. (Decided here,
// not in hx-trigger filters: those need eval, which the pages' CSP forbids.)
document.addEventListener("htmx:beforeRequest", function (evt) {
  if (!evt.detail.elt || evt.detail.elt.id !== "memory-table") return;
  var config = evt.detail.requestConfig;
  var busy = config && config.triggeringEvent
    ? document.querySelector("#memory-table tr.editing")
    : !memoriesIdle();
  if (busy) evt.preventDefault();
});

// "Select all shown" ticks or clears every row's box.
document.addEventListener("change", function (evt) {
  if (!evt.target.matches("#memory-table input[data-select-all]")) return;
  document.querySelectorAll("#memory-table input[name=ids]").forEach(function (box) {
    box.checked = evt.target.checked;
  });
});

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

// A poll that was already on its way when the operator started editing or
// selecting must not land on top of that: polls (no triggering event) are
// dropped while the table is busy.
document.addEventListener("htmx:beforeSwap", function (evt) {
  var config = evt.detail.requestConfig;
  if (evt.detail.target && evt.detail.target.id === "memory-table" && config
      && !config.triggeringEvent && !memoriesIdle()) {
    evt.detail.shouldSwap = false;
  }
});

// A row action on a memory that is gone (deleted in another tab, by the API
// or the CLI) answers 404: say so, and refresh the table.
document.addEventListener("htmx:responseError", function (evt) {
  var errors = document.getElementById("memory-errors");
  if (!errors || !document.getElementById("memory-table")) return;
  var status = evt.detail.xhr.status;
  errors.innerHTML = "";
  var message = document.createElement("p");
  message.className = "flash flash-error";
  message.textContent = status === 404
    ? "That memory no longer exists; the table has been refreshed."
    : "The request failed (HTTP " + status + "); see the service log.";
  errors.appendChild(message);
  htmx.trigger(document.body, "memories-changed");
});
