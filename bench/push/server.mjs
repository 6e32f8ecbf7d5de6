/**
 * `tickwheel serve` of the build under test (dist.mjs) in its own process, on a fresh data
 * directory and a free loopback port, fsync 'batch' (the embedded queue's default too), as bench/http/server.mjs starts it for the HTTP
 * benchmark. Its CPU time is read from /proc (Linux): it is not a process of ours to ask.
 */

import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { freePort } from '../../scripts/valkey.mjs';
import { procCpuSeconds } from '../queue/stats.mjs';
import { serving } from '../serving.mjs';
import { DIST } from './dist.mjs';

export async function startServer({ dir }) {
  const port = await freePort();
  const child = spawn(
    process.execPath,
    [
      join(DIST, 'cli/main.js'),
      'serve',
      '--dir',
      dir,
      '--port',
      String(port),
      '--fsync',
      'batch',
      '--log-level',
      'warn',
    ],
    // The receivers are on loopback, which pushes reach only when allowed (an environment
    // variable rather than --push-allow, which a build from before it would refuse).
    {
      stdio: ['ignore', 'pipe', 'inherit'],
      env: { ...process.env, TICKWHEEL_PUSH_ALLOW: '127.0.0.1' },
    },
  );
  const url = await serving(child, `http://127.0.0.1:${port}`);
  return {
    url,
    pid: child.pid,
    /** CPU seconds (user + system) the server has used so far, or null off Linux. */
    cpuSeconds() {
      return procCpuSeconds(child.pid);
    },
    async stop() {
      if (child.exitCode !== null) return;
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      await exited;
    },
  };
}
