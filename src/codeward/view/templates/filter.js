(function () {
  "use strict";
  var buttons = document.querySelectorAll("button[data-filter]");
  var search = document.getElementById("job-search");
  var rows = Array.prototype.slice.call(document.querySelectorAll("#job-table tr[data-state]"));
  var count = document.getElementById("shown-count");
  var state = "all";
  var texts = null;  // each row's id and error, lower-cased: read once, at the first text filter
  function words(row) {
    return (row.cells[0].textContent + "\n" + row.cells[row.cells.length - 1].textContent).toLowerCase();
  }
  function show() {
    var wanted = search.value.trim().toLowerCase();
    if (wanted && texts === null) { texts = rows.map(words); }
    var shown = 0;
    rows.forEach(function (row, index) {
      var rowState = row.getAttribute("data-state");
      var match = (state === "all" || rowState === state || (state === "failed" && rowState !== "success")) &&
        (!wanted || texts[index].indexOf(wanted) !== -1);
      if (row.hidden === match) { row.hidden = !match; }
      if (match) { shown += 1; }
    });
    buttons.forEach(function (button) {
      button.setAttribute("aria-pressed", String(button.getAttribute("data-filter") === state));
    });
    count.textContent = shown + " of " + rows.length + " jobs shown";
  }
  buttons.forEach(function (button) {
    button.addEventListener("click", function () { state = button.getAttribute("data-filter"); show(); });
  });
  search.addEventListener("input", show);
})();
