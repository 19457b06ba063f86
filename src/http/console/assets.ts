// The console's only stylesheet and script: served by Assay itself (no CDN), cached by hash.

export const CONSOLE_CSS = `
:root { color-scheme: light; --ink: #1b1b1f; --muted: #555a64; --line: #d5d8de; --accent: #0b4f8a;
  --bad: #9b1c1c; --good: #1f6b35; --bg: #ffffff; --panel: #f4f6f8; }
* { box-sizing: border-box; }
body { margin: 0; font: 16px/1.5 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--ink); background: var(--bg); }
a { color: var(--accent); }
a:focus-visible, button:focus-visible, input:focus-visible, select:focus-visible, [tabindex]:focus-visible
  { outline: 3px solid #f0a500; outline-offset: 2px; }
.skip { position: absolute; left: -999px; top: 0; background: var(--bg); padding: .5rem; }
.skip:focus { left: .5rem; }
header { background: var(--panel); border-bottom: 1px solid var(--line); padding: .5rem 1rem; }
header .brand { margin: 0; font-weight: 700; font-size: 1.2rem; }
header .brand a { color: var(--ink); text-decoration: none; }
nav { display: flex; flex-wrap: wrap; align-items: center; gap: .5rem 1rem; }
nav ul { display: flex; flex-wrap: wrap; gap: .25rem 1rem; list-style: none; margin: .25rem 0; padding: 0; }
nav a[aria-current="page"] { font-weight: 700; text-decoration-thickness: 3px; }
nav .sign-out { margin-left: auto; display: flex; flex-wrap: wrap; gap: .5rem; align-items: center; color: var(--muted); }
nav .sign-out span { overflow-wrap: anywhere; }
nav .sign-out button { white-space: nowrap; }
main { padding: 1rem; max-width: 72rem; margin: 0 auto; }
h1 { font-size: 1.6rem; margin: .5rem 0 1rem; overflow-wrap: anywhere; }
h2 { font-size: 1.2rem; margin: 1.5rem 0 .5rem; }
.table { overflow-x: auto; border: 1px solid var(--line); border-radius: 4px; margin: .5rem 0 1rem; }
table { border-collapse: collapse; width: 100%; font-size: .95rem; }
th, td { text-align: left; padding: .4rem .6rem; border-bottom: 1px solid var(--line); vertical-align: top; }
th { background: var(--panel); }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
code, .mono { font-family: ui-monospace, "SFMono-Regular", Menlo, monospace; font-size: .9em; word-break: break-all; }
form.inline { display: inline; }
fieldset { border: 1px solid var(--line); border-radius: 4px; margin: 0 0 1rem; padding: .5rem 1rem 1rem; }
label { display: block; margin: .5rem 0 .2rem; font-weight: 600; }
input[type=text], input[type=email], input[type=password], input[type=number], input[type=date], select
  { font: inherit; padding: .4rem; border: 1px solid #7a808a; border-radius: 4px; width: 100%; max-width: 28rem; }
.choices label { display: inline-flex; gap: .3rem; font-weight: 400; margin-right: 1rem; }
button, .button { font: inherit; padding: .4rem .9rem; border-radius: 4px; border: 1px solid var(--accent);
  background: var(--accent); color: #fff; cursor: pointer; text-decoration: none; display: inline-block; }
button.secondary { background: var(--bg); color: var(--accent); }
button.danger, .button.danger { background: var(--bad); border-color: var(--bad); }
.notice { padding: .6rem .8rem; border-radius: 4px; border: 1px solid var(--line); background: var(--panel); }
.notice.error { border-color: var(--bad); color: var(--bad); }
.notice.ok { border-color: var(--good); color: var(--good); }
.secret { font-size: 1.05rem; background: #fff8e1; border: 1px solid #c9a227; padding: .6rem; border-radius: 4px; }
.flagged { color: var(--bad); font-weight: 600; }
.clean { color: var(--good); }
.filters { display: flex; flex-wrap: wrap; gap: .5rem 1rem; align-items: flex-end; }
.filters > div { min-width: 10rem; flex: 1 1 10rem; }
.pager { display: flex; gap: 1rem; margin: 1rem 0; }
.table .mono, .table code { word-break: normal; white-space: nowrap; }
.nowrap { white-space: nowrap; }
.table button, .table .button { white-space: nowrap; }
.table .url .mono { white-space: normal; overflow-wrap: anywhere; display: inline-block; min-width: 14rem; }
.table td.wrap .value { display: block; min-width: 10rem; overflow-wrap: anywhere; }
.table td.wrap .mono { white-space: normal; }
.name { overflow-wrap: anywhere; }
ul.plain { list-style: none; margin: 0; padding: 0; }
figure { margin: 0 0 1rem; }
.chart svg { width: 100%; height: auto; max-width: 48rem; border-bottom: 1px solid var(--muted); }
.chart .axis { font-size: 11px; fill: var(--muted); }
.chart .items { fill: #4a78a8; }
.chart .findings { fill: #b23b3b; }
.muted { color: var(--muted); }
progress { width: 100%; max-width: 28rem; height: 1.2rem; }
dl { display: grid; grid-template-columns: max-content 1fr; gap: .3rem 1rem; }
dt { font-weight: 600; }
dd { margin: 0; word-break: break-word; }
label.check { display: flex; gap: .4rem; align-items: center; font-weight: 400; }
.badge { font-size: .8rem; padding: 0 .4rem; border: 1px solid var(--accent); border-radius: 4px; color: var(--accent); }
tr.stale td, tr.stale th { color: var(--muted); }
.small { font-size: .85rem; }
.table .id { font-size: .8rem; }
form.search { display: flex; flex-wrap: wrap; gap: .5rem 1rem; align-items: flex-end; margin-bottom: 1rem; }
form.search > div { flex: 0 1 28rem; }
form.search label { margin-top: 0; }
@media (max-width: 40rem) {
  nav .sign-out { margin-left: 0; }
  dl { grid-template-columns: 1fr; }
  dd { margin-bottom: .5rem; }
  .stack table, .stack tbody, .stack tr, .stack td { display: block; }
  .stack thead { position: absolute; width: 1px; height: 1px; overflow: hidden; clip-path: inset(50%); }
  .stack tr { border-bottom: 1px solid var(--line); padding: .3rem 0; }
  .stack td { border: 0; display: grid; grid-template-columns: 8rem minmax(0, 1fr); gap: .75rem; padding: .15rem .6rem; overflow-wrap: anywhere; }
  .stack td.num { text-align: left; }
  .stack td.empty { display: none; }
  .stack td::before { content: attr(data-label); content: attr(data-label) / ""; font-weight: 600; }
  .stack .mono, .stack .nowrap { white-space: normal; }
  .stack .url .mono, .stack td.wrap .value { min-width: 0; }
  .stack.unlabelled td { display: block; }
  .stack.unlabelled td::before { content: none; }
  .stack.unlabelled td:first-child { color: var(--muted); font-size: .9rem; }
}
`;

// Progressive enhancement only: every page works without it. The test upload shows its progress.
export const CONSOLE_JS = `
document.addEventListener('DOMContentLoaded', () => {
  const form = document.querySelector('form[data-upload]');
  if (!form) return;
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    const bar = document.getElementById('upload-progress');
    const status = document.getElementById('upload-status');
    const request = new XMLHttpRequest();
    request.open('POST', form.action);
    request.upload.addEventListener('progress', (e) => {
      if (e.lengthComputable) { bar.max = e.total; bar.value = e.loaded; }
      status.textContent = 'Uploading…';
    });
    request.upload.addEventListener('load', () => { status.textContent = 'Scanning…'; });
    request.addEventListener('load', () => {
      if (request.status === 200 && request.responseURL) { window.location.assign(request.responseURL); }
      else { document.open(); document.write(request.responseText); document.close(); }
    });
    request.addEventListener('error', () => { status.textContent = 'The upload failed: the connection was lost.'; });
    request.send(new FormData(form));
  });
});
`;
