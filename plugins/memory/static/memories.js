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

// A memory was added: empty the form for the next one (on an error the form
// keeps what was typed, and the error shows above the table).
document.addEventListener("memory-added", function () {
  var form = document.getElementById("memory-add");
  if (form) form.reset();
});
