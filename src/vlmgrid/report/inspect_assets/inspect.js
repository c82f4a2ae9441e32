// The inspect page's filters: which rows to show, by what the row's data attributes say. No network.
(function () {
  const show = document.getElementById("show");
  const model = document.getElementById("model");
  const count = document.getElementById("count");
  if (!show) return;  // a page without model columns has no filters
  const rows = Array.from(document.querySelectorAll("tr.item"));

  // data-wrong, data-error and data-batch list the model columns (by position) that answered the item so.
  function has(list, which) {
    const columns = list ? list.split(" ") : [];
    return which === "any" ? columns.length > 0 : columns.includes(which);
  }

  function visible(row) {
    switch (show.value) {
      case "wrong": return has(row.dataset.wrong, model.value);
      case "error": return has(row.dataset.error, model.value);
      case "disagree": return row.dataset.disagree === "1";
      case "batch": return has(row.dataset.batch, model.value);  // answers that changed one at a time
      default: return true;
    }
  }

  function apply() {
    let shown = 0;
    for (const row of rows) {
      const on = visible(row);
      row.hidden = !on;
      if (on) shown += 1;
    }
    // The model choice does not narrow "models disagree": that filter compares all of them.
    model.disabled = show.value === "all" || show.value === "disagree";
    count.textContent = shown + " of " + rows.length + " rows shown";
  }

  show.addEventListener("change", apply);
  model.addEventListener("change", apply);
  apply();
})();
