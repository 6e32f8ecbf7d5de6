/**
 * GET /: the dashboard. A placeholder until the dashboard's own issue lands: it says so and
 * links what already exists.
 */

export function dashboardPage(version: string, tokenRequired: boolean): string {
  const tokenNote = tokenRequired
    ? '<p>This server needs a token: /v1 routes want <code>Authorization: Bearer &lt;token&gt;</code>.</p>'
    : '';
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>tickwheel</title>
<style>
  body { font: 16px/1.5 system-ui, sans-serif; max-width: 40rem; margin: 4rem auto; padding: 0 1rem; color: #222; }
  code { background: #f3f3f3; padding: 0 .25em; border-radius: 3px; }
  li { margin: .25rem 0; }
</style>
</head>
<body>
<h1>tickwheel ${version}</h1>
<p>The dashboard is coming. Until then:</p>
<ul>
  <li><a href="/v1/stats">/v1/stats</a>: the queue's counters, messages by topic, lateness, store and fsync figures (JSON)</li>
  <li><a href="/metrics">/metrics</a>: the same for Prometheus</li>
  <li><a href="/healthz">/healthz</a>: liveness</li>
</ul>
${tokenNote}
</body>
</html>
`;
}
