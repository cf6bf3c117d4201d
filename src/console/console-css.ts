/** The console's one stylesheet (served as `/console.css`: the pages' Content-Security-Policy allows no inline style). */
export const CONSOLE_CSS = `
:root { color-scheme: light; --fg:#1d232a; --muted:#5b6570; --line:#d8dde3; --bg:#f6f7f9; --add:#e6f6ea; --add-fg:#116329; --del:#fdecec; --del-fg:#a01c1c; --hunk:#eef3fb; --warn:#fff4d6; --warn-line:#e0b400; }
* { box-sizing: border-box; }
body { margin: 0; font: 15px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--fg); background: var(--bg); }
header { background: #1d232a; color: #fff; padding: 10px 24px; display: flex; gap: 24px; align-items: baseline; }
header strong { font-size: 17px; letter-spacing: .3px; }
header nav a { color: #cfd6de; margin-right: 16px; text-decoration: none; }
header nav a.here { color: #fff; border-bottom: 2px solid #fff; }
main { max-width: 1100px; margin: 0 auto; padding: 20px 24px 40px; }
h1 { font-size: 21px; margin: 4px 0 14px; }
h2 { font-size: 16px; margin: 22px 0 8px; }
section.card { background: #fff; border: 1px solid var(--line); border-radius: 6px; padding: 14px 18px; margin-bottom: 14px; }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: 4px 16px; margin: 0; }
dl.facts dt { color: var(--muted); }
dl.facts dd { margin: 0; }
.warning { background: var(--warn); border-left: 4px solid var(--warn-line); padding: 8px 12px; margin: 6px 0; }
pre { background: #fbfcfd; border: 1px solid var(--line); border-radius: 4px; padding: 10px; overflow: auto; max-height: 480px; font: 13px/1.4 ui-monospace, "DejaVu Sans Mono", monospace; margin: 6px 0; white-space: pre; }
pre.diff { padding: 0; }
pre.diff span { display: block; padding: 0 10px; }
pre.diff .add { background: var(--add); color: var(--add-fg); }
pre.diff .del { background: var(--del); color: var(--del-fg); }
pre.diff .hunk { background: var(--hunk); color: #2a4f8a; }
pre.diff .file { font-weight: 600; background: #f0f2f5; }
ul.changes { margin: 4px 0; padding-left: 20px; }
.tag { display: inline-block; background: #e8ecf1; border-radius: 10px; padding: 0 8px; font-size: 13px; margin-right: 4px; }
table { border-collapse: collapse; width: 100%; background: #fff; border: 1px solid var(--line); }
th, td { text-align: left; padding: 6px 10px; border-bottom: 1px solid var(--line); vertical-align: top; font-size: 14px; }
th { background: #f0f2f5; font-weight: 600; }
.allowed, .approved, .ok { color: var(--add-fg); font-weight: 600; }
.denied, .declined, .blocked, .broken { color: var(--del-fg); font-weight: 600; }
.pending { color: #8a5a00; font-weight: 600; }
.actions { display: flex; gap: 12px; margin-top: 12px; }
button { font: inherit; padding: 8px 20px; border-radius: 5px; border: 1px solid #9aa4ae; background: #fff; cursor: pointer; }
button.approve { background: #1a7f37; border-color: #1a7f37; color: #fff; }
button.decline { background: #fff; border-color: #cf222e; color: #cf222e; }
form.filters { display: flex; flex-wrap: wrap; gap: 10px; align-items: end; margin-bottom: 12px; }
form.filters label { display: flex; flex-direction: column; font-size: 13px; color: var(--muted); }
form.filters input, form.filters select { font: inherit; padding: 4px 6px; }
.muted { color: var(--muted); }
.status { padding: 8px 12px; border-radius: 4px; margin-bottom: 12px; }
.status.ok { background: var(--add); }
.status.broken { background: var(--del); }
`;
