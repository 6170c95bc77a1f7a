// A plain form marked data-confirm asks before it is sent (htmx requests ask
// through hx-confirm): for what cannot be undone, such as stopping a running
// session. A form sent without this script (none loaded) is still sent:
// the server needs no answer of it.
document.addEventListener("submit", function (evt) {
  var form = evt.target;
  var question = form.getAttribute && form.getAttribute("data-confirm");
  if (question && !window.confirm(question)) evt.preventDefault();
});
