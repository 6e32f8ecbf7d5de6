/**
 * `tickwheel serve --redis` started while its Valkey primary is not there: killed in the middle
 * of the node's opening (seen through MONITOR, so that calls are in flight when it dies) and
 * started again, down when the node starts and brought up later, or stalled (SIGSTOP). A node
 * that is running rides such outages out; one that is opening must too: it keeps trying, with
 * back-off, until --connect-timeout, comes up once Valkey is back, and serves. Past the timeout
 * it exits with ERR_TICKWHEEL_UNAVAILABLE, never a bare socket error, never a hang.
 */

import { spawn, type ChildProcess } from 'node:child_process';
import { afterEach, describe, expect, it } from 'vitest';
import { TickwheelClient } from '../../src/client/index.js';
import { runCli, startServer, type ServerProcess } from '../server/process.js';
// @ts-expect-error: a plain JavaScript module of the project's scripts.
import { installed, startServer as startValkey } from '../../scripts/valkey.mjs';
import { waitFor } from '../support/wait-for.js';

interface ValkeyProcess {
  url: string;
  port: number;
  process: ChildProcess;
  running: boolean;
  crash(): Promise<void>;
  restart(): Promise<void>;
  stop(): Promise<void>;
}

/** Schedules a message through `url` and receives it there: the server serves. */
async function servesAt(url: string): Promise<void> {
  const client = new TickwheelClient({ url });
  try {
    const { id } = await client.schedule({ topic: 'after', payload: { ok: true }, delayMs: 100 });
    const got = await client.receive('after', { waitMs: 10_000 });
    expect(got.map((m) => m.id)).toEqual([id]);
    expect(await client.ack(got[0].receipt)).toBe(true);
  } finally {
    await client.close();
  }
}

describe.runIf(installed('valkey-server'))('a node started while Valkey is not there', () => {
  let valkey: ValkeyProcess | undefined;
  let server: ServerProcess | undefined;
  let monitor: ChildProcess | undefined;

  afterEach(async () => {
    monitor?.kill();
    await server?.kill();
    if (valkey?.running === false) await valkey.restart().catch(() => {});
    await valkey?.stop();
    valkey = server = monitor = undefined;
  });

  it('comes up when its primary is killed and restarted in the middle of its opening', async () => {
    const v = (valkey = (await startValkey()) as ValkeyProcess);
    // The first call the node makes once connected: its library check. Killed there, calls of
    // the opening are in flight (and more are written to a dead socket: ECONNRESET).
    monitor = spawn('valkey-cli', ['-p', String(v.port), 'MONITOR'], { stdio: 'pipe' });
    let seen = '';
    let restarted: Promise<void> | undefined;
    monitor.stdout!.setEncoding('utf8').on('data', (text: string) => {
      seen += text;
      if (restarted === undefined && seen.includes('"tw_version"')) {
        restarted = v.crash().then(() => v.restart());
      }
    });
    await new Promise<void>((resolve) => {
      const watch = () => (seen.startsWith('OK') ? resolve() : setTimeout(watch, 20));
      watch();
    });

    server = await startServer(['--redis', v.url, '--durability', 'async', '--partitions', '8'], {
      timeoutMs: 30_000,
    });
    expect(restarted).toBeDefined();
    await restarted;
    await servesAt(server.url);
  }, 60_000);

  it('comes up when its primary is down at its start and brought up later', async () => {
    const v = (valkey = (await startValkey()) as ValkeyProcess);
    await v.crash();
    const starting = startServer(
      ['--redis', v.url, '--durability', 'async', '--connect-timeout', '60s'],
      { until: /joining: until it has, (http:\/\/\S+) answers 503/, timeoutMs: 30_000 },
    );
    server = await starting;
    // It listens (answering 503) while it keeps trying; Valkey comes back only now.
    const health = await fetch(`${server.url}/healthz`);
    expect(health.status).toBe(503);
    await v.restart();
    await waitFor(() => /tickwheel listening on/.test(server!.stdout()), {
      timeoutMs: 30_000,
      what: 'the server coming up',
    });
    await servesAt(server.url);
  }, 60_000);

  it('gives up after --connect-timeout with ERR_TICKWHEEL_UNAVAILABLE on a stalled primary', async () => {
    const v = (valkey = (await startValkey()) as ValkeyProcess);
    // Accepts connections (the kernel does) but never answers.
    v.process.kill('SIGSTOP');
    try {
      const result = await runCli([
        'serve',
        '--port',
        '0',
        '--redis',
        v.url,
        '--durability',
        'async',
        '--connect-timeout',
        '2s',
      ]);
      expect(result.code).not.toBe(0);
      expect(result.stderr).toMatch(/ERR_TICKWHEEL_UNAVAILABLE/);
      expect(result.stderr).toMatch(/kept trying for 2000 ms/);
    } finally {
      v.process.kill('SIGCONT');
    }
  }, 60_000);
});
