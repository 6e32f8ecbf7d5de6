/**
 * The server under test: `tickwheel serve` from dist/, in its own process, on a fresh data
 * directory and a free port. Its CPU time is read from /proc (Linux) so each phase can report
 * how busy the server was.
 */

import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { URL, fileURLToPath } from 'node:url';
import { freePort } from '../../scripts/valkey.mjs';
import { serving } from '../serving.mjs';

const CLI = fileURLToPath(new URL('../../dist/cli/main.js', import.meta.url));

export async function startServer({ dir, fsync, extraArgs = [] }) {
  if (!existsSync(CLI)) throw new Error(`${CLI} is missing; run npm run build first`);
  const port = await freePort();
  const child = spawn(
    process.execPath,
    [
      CLI,
      'serve',
      '--dir',
      dir,
      '--port',
      String(port),
      '--fsync',
      fsync,
      '--log-level',
      'warn',
      ...extraArgs,
    ],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  const url = await serving(child, `http://127.0.0.1:${port}`);
  return {
    url,
    pid: child.pid,
    /** CPU seconds (user + system) the server has used so far, or null off Linux. */
    cpuSeconds() {
      try {
        const fields = readFileSync(`/proc/${child.pid}/stat`, 'utf8').split(') ')[1].split(' ');
        // utime and stime are fields 14 and 15 of stat, in clock ticks (USER_HZ, 100 on Linux).
        return (Number(fields[11]) + Number(fields[12])) / 100;
      } catch {
        return null;
      }
    },
    async stop() {
      if (child.exitCode !== null) return;
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      await exited;
    },
  };
}
