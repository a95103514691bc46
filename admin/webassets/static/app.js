// Live updates for the approvals page: poll /api/approvals every second and,
// when the set of pending approvals changes, swap in the freshly rendered
// list (the server renders it; this script builds no HTML itself). A deny
// reason being typed is never thrown away: the page offers a button instead.
(function () {
  "use strict";
  var list = document.getElementById("list");
  var live = document.getElementById("live");
  var stale = document.getElementById("stale");
  var busy = false;

  // Times arrive in UTC (RFC 3339); show them in the viewer's zone.
  function localTimes(root) {
    var ts = root.querySelectorAll("time[datetime]");
    for (var i = 0; i < ts.length; i++) {
      var d = new Date(ts[i].getAttribute("datetime"));
      if (!isNaN(d)) { ts[i].textContent = d.toLocaleString(); ts[i].title = ts[i].getAttribute("datetime"); }
    }
  }
  localTimes(document);
  if (!list) { return; }

  function fingerprint(items) {
    return items.map(function (a) { return a.id; }).sort().join(" ");
  }

  function editing() {
    var inputs = list.querySelectorAll("input[name=reason]");
    for (var i = 0; i < inputs.length; i++) {
      if (inputs[i].value !== "" || inputs[i] === document.activeElement) { return true; }
    }
    return false;
  }

  function setLive(ok) {
    live.textContent = ok ? "live" : "daemon unreachable, retrying";
    live.classList.toggle("offline", !ok);
  }

  function swap() {
    return fetch("/", { credentials: "same-origin", cache: "no-store" }).then(function (r) {
      if (r.redirected || !r.ok) { location.reload(); return; }
      return r.text().then(function (html) {
        var fresh = new DOMParser().parseFromString(html, "text/html").getElementById("list");
        if (fresh) {
          list.replaceWith(document.adoptNode(fresh));
          list = fresh;
          localTimes(list);
          stale.hidden = true;
        }
      });
    });
  }

  function tick() {
    if (busy) { return; }
    busy = true;
    fetch("/api/approvals", { credentials: "same-origin", cache: "no-store", headers: { Accept: "application/json" } })
      .then(function (r) {
        if (r.status === 401) { location.assign("/login"); return; }
        if (!r.ok) { throw new Error("HTTP " + r.status); }
        return r.json().then(function (body) {
          setLive(true);
          if (fingerprint(body.approvals || []) === list.dataset.fp) { return; }
          if (editing()) { stale.hidden = false; return; }
          return swap();
        });
      })
      .catch(function () { setLive(false); })
      .finally(function () { busy = false; });
  }

  document.getElementById("refresh").addEventListener("click", swap);
  setInterval(tick, 1000);
})();
