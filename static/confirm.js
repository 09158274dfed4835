/* The question asked before an action on jobs, as a dialog (templates/jobs/confirm.html).
 *
 * Without JavaScript the action's form posts and the answer is a page that asks. With it,
 * htmx posts the same form (hx-post, hx-target="#confirm-dialog") and the same question, the
 * page's part alone, lands in a <dialog>, which this script opens as a modal: focus moves
 * into it (to the typed number when one is asked for, else to "Go back", the harmless
 * choice), Escape or "Go back" closes it, and focus returns to the button that asked. The
 * dialog's own form posts as the page's does. A file of its own because the
 * Content-Security-Policy forbids inline script.
 */
(function () {
  "use strict";

  function ready(dialog) {
    let opener = null;

    document.body.addEventListener("htmx:beforeRequest", function (event) {
      if (event.detail.target !== dialog) return;
      const asked = event.detail.requestConfig && event.detail.requestConfig.triggeringEvent;
      opener = (asked && asked.submitter) || document.activeElement;
    });

    document.body.addEventListener("htmx:afterSwap", function (event) {
      if (event.detail.target !== dialog) return;
      if (!dialog.open) dialog.showModal();
      const first = dialog.querySelector("[autofocus]") || dialog.querySelector("[data-dismiss]");
      if (first) first.focus();
    });

    dialog.addEventListener("click", function (event) {
      if (event.target.closest("[data-dismiss]")) {
        event.preventDefault(); // the link is the page's way back; here, close
        dialog.close();
      }
    });

    dialog.addEventListener("close", function () {
      dialog.replaceChildren(); // nothing of an answered question is left to post
      if (opener && opener.isConnected) opener.focus();
      opener = null;
    });
  }

  document.querySelectorAll("dialog.confirm-dialog").forEach(ready);
})();
