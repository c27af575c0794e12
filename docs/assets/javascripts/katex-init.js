// Render the math that pymdownx.arithmatex (generic mode) leaves in the page: \( ... \) in span.arithmatex,
// \[ ... \] in div.arithmatex. KaTeX is bundled (docs/assets/katex), so the pages render offline.
(function () {
  function renderMath(root) {
    root.querySelectorAll(".arithmatex").forEach(function (el) {
      if (el.dataset.rendered) return;
      var tex = el.textContent.trim();
      var display = tex.indexOf("\\[") === 0;
      katex.render(tex.slice(2, -2), el, { displayMode: display, throwOnError: false });
      el.dataset.rendered = "1";
    });
  }
  if (typeof document$ !== "undefined") {
    document$.subscribe(function () { renderMath(document); }); // Material's page-load signal (instant navigation too)
  } else {
    renderMath(document);
  }
})();
