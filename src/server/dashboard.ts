/** GET / and /assets/*: the dashboard Vite built (or a placeholder page), served from memory. */

import { readdirSync, readFileSync, statSync } from 'node:fs';
import { extname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export interface DashboardAsset {
  body: Buffer;
  contentType: string;
}

const CONTENT_TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.json': 'application/json; charset=utf-8',
  '.map': 'application/json; charset=utf-8',
  '.woff2': 'font/woff2',
};

/** dist/server/dashboard.js -> dist/dashboard/ */
const DASHBOARD_DIR = fileURLToPath(new URL('../dashboard/', import.meta.url));

/** The built dashboard by URL path ('/index.html', '/assets/...'); undefined without a build. */
export function loadDashboardAssets(dir = DASHBOARD_DIR): Map<string, DashboardAsset> | undefined {
  const assets = new Map<string, DashboardAsset>();
  const walk = (folder: string, prefix: string) => {
    for (const name of readdirSync(folder)) {
      const path = join(folder, name);
      if (statSync(path).isDirectory()) walk(path, `${prefix}${name}/`);
      else {
        assets.set(`${prefix}${name}`, {
          body: readFileSync(path),
          contentType: CONTENT_TYPES[extname(name)] ?? 'application/octet-stream',
        });
      }
    }
  };
  try {
    walk(dir, '/');
  } catch {
    return undefined;
  }
  return assets.has('/index.html') ? assets : undefined;
}

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
