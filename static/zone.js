// Tells Caldera the browser's time zone, so that the pages show their times in it.
//
// The zone goes in the cookie caldera_tz (portal/preferences.py reads it: a person's own
// choice on their page wins over it). A page written in another zone, for a person who
// chose none, is asked for again once, now with the cookie; the tab remembers the zone
// it asked again for, so a browser that keeps no cookie is not reloaded over and over.
(function () {
  "use strict";
  var zone;
  try {
    zone = Intl.DateTimeFormat().resolvedOptions().timeZone;
  } catch (error) {
    return;
  }
  if (!zone) return;
  var sent = document.cookie.match(/(?:^|;\s*)caldera_tz=([^;]*)/);
  if (!sent || sent[1] !== zone) {
    // An IANA name (Asia/Shanghai) is a valid cookie value as it is: no encoding, which
    // the server would not undo.
    document.cookie =
      "caldera_tz=" + zone + "; path=/; max-age=31536000; SameSite=Lax" +
      (location.protocol === "https:" ? "; Secure" : "");
  }
  var page = document.querySelector('meta[name="caldera-zone"]');
  // Only a plain GET of a person who chose no zone (base.html): asking again for a
  // form's answer would send it twice.
  if (!page || !page.hasAttribute("data-follow-browser")) return;
  if (page.getAttribute("content") === zone) return;
  try {
    if (sessionStorage.getItem("caldera-zone-asked") === zone) return;
    sessionStorage.setItem("caldera-zone-asked", zone);
  } catch (error) {
    return; // nowhere to remember it: never risk a loop
  }
  location.reload();
})();
