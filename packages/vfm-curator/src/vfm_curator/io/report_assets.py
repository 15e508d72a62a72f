"""The style sheet and the script of ``report.html``, inlined into the page (it must open from a
folder with no server and no network). The script only sorts and hides table rows that the page
already holds: it builds no HTML, so nothing from the data can run as code."""

CSS = """
body{font-family:system-ui,sans-serif;margin:1.5em 2em;color:#222}
h1{margin-bottom:0} h2{margin-top:1.6em;border-bottom:1px solid #ddd}
.muted{color:#777;font-weight:normal}
.figures{display:flex;flex-wrap:wrap;gap:10px;padding:0;list-style:none}
.figures li{border:1px solid #ddd;border-radius:6px;padding:8px 12px;min-width:140px}
.figures b{display:block;font-size:1.35em}
.charts{display:flex;flex-wrap:wrap;gap:16px}
.chart{margin:0} .chart figcaption{font-weight:600;margin-bottom:4px}
.chart svg{background:#fafafa;border:1px solid #eee}
.chart rect{fill:#4a7bd0} .chart text{font-size:11px;fill:#333} .chart .axis{stroke:#999}
table{border-collapse:collapse;font-size:.92em}
td,th{border:1px solid #ddd;padding:3px 6px;text-align:left;vertical-align:top}
th button{font:inherit;font-weight:600;background:none;border:0;padding:0;cursor:pointer}
th[aria-sort=ascending] button::after{content:" \\25B2"} th[aria-sort=descending] button::after{content:" \\25BC"}
td.num{text-align:right;font-variant-numeric:tabular-nums}
td.caption{max-width:28em} td.thumb img{height:54px;display:block}
tr.filtered{background:#fff6f0} tr.removed{background:#f3f0ff} .why{color:#a24}
.controls{display:flex;gap:12px;align-items:center;margin:8px 0}
.failures td.advice{max-width:36em}
"""

# Runs last in <body>. Marks <body data-script="ok"> when it finished without an error; the handler
# installed first in <head> marks data-script-error with the message of any error on the page.
SCRIPT = """
(function () {
  var table = document.getElementById('clips');
  if (!table) { document.body.setAttribute('data-script', 'ok'); return; }
  var body = table.tBodies[0];
  var rows = Array.prototype.slice.call(body.rows);
  var search = document.getElementById('clip-search');
  var status = document.getElementById('clip-status');
  var minDur = document.getElementById('clip-min-duration');
  var shown = document.getElementById('clip-shown');
  function apply() {
    var q = search.value.toLowerCase(), st = status.value, md = parseFloat(minDur.value) || 0, n = 0;
    rows.forEach(function (r) {
      var ok = (!q || r.getAttribute('data-text').indexOf(q) >= 0) &&
               (st === 'all' || r.getAttribute('data-status') === st) &&
               parseFloat(r.getAttribute('data-duration')) >= md;
      r.hidden = !ok;
      if (ok) { n++; }
    });
    shown.textContent = n + ' of ' + rows.length + ' clips shown';
  }
  var heads = Array.prototype.slice.call(table.tHead.rows[0].cells);
  heads.forEach(function (th, col) {
    var button = th.querySelector('button');
    if (!button) { return; }
    button.addEventListener('click', function () {
      var up = th.getAttribute('aria-sort') !== 'ascending';
      var numeric = th.getAttribute('data-type') === 'num';
      heads.forEach(function (h) { h.removeAttribute('aria-sort'); });
      th.setAttribute('aria-sort', up ? 'ascending' : 'descending');
      rows.sort(function (x, y) {
        var a = x.cells[col].getAttribute('data-v') || '', b = y.cells[col].getAttribute('data-v') || '';
        var d;
        if (numeric) {
          var fa = parseFloat(a), fb = parseFloat(b);
          fa = isNaN(fa) ? -Infinity : fa; fb = isNaN(fb) ? -Infinity : fb;
          d = fa === fb ? 0 : (fa < fb ? -1 : 1);
        } else {
          d = a.localeCompare(b);
        }
        return up ? d : -d;
      });
      rows.forEach(function (r) { body.appendChild(r); });
    });
  });
  search.addEventListener('input', apply);
  status.addEventListener('change', apply);
  minDur.addEventListener('input', apply);
  apply();
  document.body.setAttribute('data-script', 'ok');
})();
"""

ERROR_HOOK = """
window.addEventListener('error', function (ev) {
  document.documentElement.setAttribute('data-script-error', String(ev.message || ev));
});
"""
