// The theme a person chose on their page (access.models.Preference), for the pages whose
// <html> Caldera does not write itself: Django's admin reads data-theme on <html> ("auto":
// the system's scheme), Swagger UI (the API docs) the class dark-mode. The server names the
// choice on this script's own element (data-theme: "", "light" or "dark"), as the
// Content-Security-Policy allows no inline script. Caldera's own pages need no script:
// templates/base.html names the theme and static/caldera.css paints it.
(function () {
  "use strict";
  const chosen = document.currentScript.dataset.theme || "auto";
  const root = document.documentElement;
  const system = window.matchMedia("(prefers-color-scheme: dark)");
  function paint() {
    root.dataset.theme = chosen;
    root.classList.toggle("dark-mode", chosen === "dark" || (chosen === "auto" && system.matches));
  }
  paint();
  system.addEventListener("change", paint);
})();
