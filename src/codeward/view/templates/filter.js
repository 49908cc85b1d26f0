(function () {
  "use strict";
  var buttons = document.querySelectorAll("button[data-filter]");
  var rows = document.querySelectorAll("#job-table tr[data-state]");
  var count = document.getElementById("shown-count");
  function show(filter) {
    var shown = 0;
    rows.forEach(function (row) {
      var state = row.getAttribute("data-state");
      var match = filter === "all" || state === filter || (filter === "failed" && state !== "success");
      row.hidden = !match;
      if (match) { shown += 1; }
    });
    buttons.forEach(function (button) {
      button.setAttribute("aria-pressed", String(button.getAttribute("data-filter") === filter));
    });
    count.textContent = shown + " of " + rows.length + " jobs shown";
  }
  buttons.forEach(function (button) {
    button.addEventListener("click", function () { show(button.getAttribute("data-filter")); });
  });
})();
