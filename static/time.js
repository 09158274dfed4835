// Relative times and countdowns, written by the browser over the exact times the server
// wrote (portal/templatetags/times.py: <time data-relative> and <time data-countdown>).
//
// The server writes only exact times, so a polled fragment's bytes do not change with the
// clock and still answer 304 (portal/fragments.py). Here each marked <time> keeps its
// exact text for screen readers (visually hidden) and gains a second text, hidden from
// them, that people see: "3 minutes ago" (again every 15 s), "in 1:23" (every second),
// then "now". Its title, the exact time with its zone, stays for the mouse. The morph that
// refreshes a part (idiomorph) is told to leave such a <time> alone while the server still
// writes it the same, so the words neither flicker nor are read out at every refresh.
(function () {
  "use strict";
  var MARKED = "time[data-relative], time[data-countdown]";
  var lang = document.documentElement.lang || undefined;
  var words;
  try {
    words = new Intl.RelativeTimeFormat(lang, { numeric: "auto" });
  } catch (error) {
    words = new Intl.RelativeTimeFormat(undefined, { numeric: "auto" });
  }
  var UNITS = [
    ["year", 365 * 86400],
    ["month", 30 * 86400],
    ["day", 86400],
    ["hour", 3600],
    ["minute", 60],
  ];

  function relative(seconds) {
    var size = Math.abs(seconds);
    if (size < 10) return words.format(0, "second");
    for (var i = 0; i < UNITS.length; i++) {
      if (size >= UNITS[i][1]) return words.format(Math.trunc(seconds / UNITS[i][1]), UNITS[i][0]);
    }
    return words.format(Math.trunc(seconds), "second");
  }

  function pad(n) {
    return (n < 10 ? "0" : "") + n;
  }

  function left(seconds, pattern) {
    if (seconds <= 0) return words.format(0, "second");
    var h = Math.floor(seconds / 3600);
    var m = Math.floor((seconds % 3600) / 60);
    var s = seconds % 60;
    var clock = h ? h + ":" + pad(m) + ":" + pad(s) : m + ":" + pad(s);
    return pattern.replace("%s", clock);
  }

  // The <time> as the server wrote it, before this script added its two texts.
  function written(el) {
    return [el.getAttribute("datetime"), el.getAttribute("title"), el.dataset.countdown || "", el.dataset.exact];
  }

  function show(el, now) {
    var at = Date.parse(el.getAttribute("datetime"));
    if (isNaN(at)) return;
    var seen = el.querySelector(":scope > .time-seen");
    if (!seen) {
      el.dataset.exact = el.textContent;
      var exact = document.createElement("span");
      exact.className = "visually-hidden";
      exact.textContent = el.textContent;
      seen = document.createElement("span");
      seen.className = "time-seen";
      seen.setAttribute("aria-hidden", "true");
      el.replaceChildren(exact, seen);
    }
    var seconds = (at - now) / 1000;
    var text = el.hasAttribute("data-countdown")
      ? left(Math.ceil(seconds), el.dataset.countdown)
      : relative(seconds);
    if (seen.textContent !== text) seen.textContent = text;
  }

  function showAll(selector) {
    var now = Date.now();
    document.querySelectorAll(selector || MARKED).forEach(function (el) {
      show(el, now);
    });
  }

  if (window.Idiomorph) {
    var callbacks = window.Idiomorph.defaults.callbacks;
    var before = callbacks.beforeNodeMorphed;
    var after = callbacks.afterNodeMorphed;
    callbacks.beforeNodeMorphed = function (old, fresh) {
      if (old.nodeType === 1 && old.matches(MARKED) && old.dataset.exact !== undefined &&
          fresh.nodeType === 1 && fresh.matches(MARKED)) {
        var was = written(old);
        var is = [fresh.getAttribute("datetime"), fresh.getAttribute("title"),
          fresh.dataset.countdown || "", fresh.textContent];
        if (was.join("\n") === is.join("\n")) return false; // unchanged: keep its words
      }
      return before.apply(this, arguments);
    };
    callbacks.afterNodeMorphed = function (old) {
      var result = after.apply(this, arguments);
      if (old.nodeType === 1 && old.matches(MARKED)) {
        delete old.dataset.exact;
        show(old, Date.now()); // the server wrote it anew: its words again, before a paint
      }
      return result;
    };
  }

  showAll();
  ["htmx:afterSwap", "htmx:afterSettle", "htmx:historyRestore"].forEach(function (name) {
    document.addEventListener(name, function () {
      showAll();
    });
  });
  setInterval(function () {
    showAll("time[data-countdown]");
  }, 1000);
  setInterval(function () {
    showAll("time[data-relative]");
  }, 15000);
})();
