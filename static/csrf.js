/* A page older than its person's sign-in (they signed in or out since, perhaps in another
 * tab) has a CSRF token the server no longer takes. When a part of the page (an htmx
 * request) is refused for it, the answer carries the session's token
 * (portal/errors.py, the "caldera:csrf-renewed" event): this script puts it where the
 * page's requests and forms take it from, says that nothing was changed, and asks again
 * for a part that only shows something (marked data-renew-retry, such as the submit form's
 * preview). Actions are never sent again without the person. A file of its own because the
 * Content-Security-Policy forbids inline script.
 */
(function () {
  "use strict";

  function renew(token) {
    const body = document.body;
    try {
      const headers = JSON.parse(body.getAttribute("hx-headers") || "{}");
      headers["X-CSRFToken"] = token;
      body.setAttribute("hx-headers", JSON.stringify(headers));
    } catch (error) {
      body.setAttribute("hx-headers", JSON.stringify({ "X-CSRFToken": token }));
    }
    document.querySelectorAll('input[name="csrfmiddlewaretoken"]').forEach(function (input) {
      input.value = token;
    });
  }

  function say(message) {
    let list = document.querySelector("main .messages");
    if (!list) {
      list = document.createElement("ul");
      list.className = "messages";
      const main = document.querySelector("main");
      main.insertBefore(list, main.firstChild);
    }
    const item = document.createElement("li");
    item.className = "message error";
    item.setAttribute("role", "alert");
    item.textContent = message;
    list.replaceChildren(item);
  }

  document.addEventListener("caldera:csrf-renewed", function (event) {
    renew(event.detail.token);
    const asker = event.target instanceof Element ? event.target.closest("[data-renew-retry]") : null;
    // Once: a check that fails for another reason (a proxy's wrong Origin) must not loop.
    if (asker && window.htmx && !asker.dataset.renewed) {
      asker.dataset.renewed = "1";
      window.htmx.trigger(asker, "change");
    } else {
      say(event.detail.message);
    }
  });
})();
