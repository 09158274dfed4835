/* A <details data-fold-small> (the jobs page's filters) is open as the server writes it,
 * so that without script nothing is hidden; on a narrow screen this folds it behind its
 * summary, so the page's rows come first, unless it holds errors to read
 * (data-keep-open). Widened again, it opens. A file of its own because the
 * Content-Security-Policy forbids inline script.
 */
(function () {
  "use strict";
  const narrow = window.matchMedia("(max-width: 600px)");

  function fit() {
    document.querySelectorAll("details[data-fold-small]").forEach(function (fold) {
      if (!narrow.matches) fold.open = true;
      else if (!fold.hasAttribute("data-keep-open")) fold.open = false;
    });
  }

  fit();
  narrow.addEventListener("change", fit);
})();
