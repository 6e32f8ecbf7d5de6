import { execFile, spawnSync } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
// @ts-expect-error: a plain JavaScript module of the project's scripts.
import { postgresInstalled } from '../scripts/postgres.mjs';

/**
 * Every examples/*.mjs runs as a user would run it (`node examples/x.mjs`, importing the built
 * package by name), must end by itself with exit code 0, and must print what it promises: the
 * lines below, in this order (other lines may come between). An example without an entry here
 * fails, so a new one cannot slip in untested.
 */

const root = fileURLToPath(new URL('..', import.meta.url));

const expected: Record<string, RegExp[]> = {
  'idle-sockets.mjs': [
    /^client: sent 5 messages, now going quiet$/,
    /^server: nothing written for 100 ms, sending NOOP$/,
    /^server: nothing read for 300 ms, closing the connection$/,
    /^client: the server hung up after ~\d+ ms of silence$/,
    /^client: received [1-9]\d* NOOPs while quiet$/,
  ],
  'heartbeat.mjs': [
    /^server: bob is quiet, PING #1$/,
    /^server: bob is quiet, PING #2$/,
    /^server: bob is quiet, PING #3$/,
    /^server: bob left 3 PINGs unanswered, closing$/,
    /^bob: disconnected by the server after ~\d+ ms$/,
    /^alice: answered \d+ PINGs meanwhile, still connected: true$/,
  ],
  'rpc-deadlines.mjs': [
    /^add\(2, 3\) = 5$/,
    /^slow\(\) failed: TimeoutError ERR_TICKWHEEL_TIMEOUT: request 1 timed out after 100 ms$/,
    /^slow\(\) cancelled: AbortError \(user pressed cancel\)$/,
    /^withDeadline: TimeoutError: the operation timed out after 50 ms$/,
    /^client: 0 calls in flight$/,
  ],
  'redis-lock.mjs': [
    /^worker 1: got the lock$/,
    /^worker 2: lock busy$/,
    /^worker 1: done after 2000 ms, the 600 ms lease renewed \d+ times$/,
    /^worker 1: released$/,
    /^worker 2: got the lock$/,
    /^worker 2: lease lost: renew\(\) answered false: the lease is no longer held$/,
    /^worker 2: stopped its work$/,
  ],
  'tracing.mjs': [
    /^the message carried traceparent 00-[0-9a-f]{32}-[0-9a-f]{16}-01$/,
    /^trace [0-9a-f]{32}: 4 spans$/,
    /^POST \/checkout$/,
    /^ {2}create emails PRODUCER$/,
    /^ {4}process emails CONSUMER \[ack\]$/,
    /^ {6}send email$/,
  ],
  'topic-controls.mjs': [
    /^paused: 0 sent in 300 ms, 6 waiting$/,
    /^after a restart: paused true, at most 10 a second$/,
    /^resumed: sent 1, 2, 3, 4, 5, 6$/,
    /^the last one waited for its token$/,
  ],
  'events.mjs': [
    /^dead letter: order-2 after 2 attempts$/,
    /^failed order-1 attempt 1 \(Error: payment service said no\)$/,
    /^order-1: scheduled > delivered > failed > delivered > acked$/,
    /^order-2: scheduled > delivered > failed > delivered > dead$/,
  ],
  'push.mjs': [
    /^target: POST \/hooks\/mail, headers authorization$/,
    /^first attempt failed: PushError: HTTP 500 Internal Server Error$/,
    /^pushed welcome-1 to ana@example\.com, attempt [2-9]$/,
    /^pushed welcome-2 to bo@example\.com, attempt \d$/,
    /^succeeded 2, failed [1-9]\d*$/,
  ],
  'recurring.mjs': [
    /^nightly-report: next at \d\d:\d\d UTC$/,
    /^before the restart: 2 heartbeats$/,
    /^after it: 4 heartbeats, at \+0 ms, \+1000 ms, .*, none twice$/,
    /^schedules: heartbeat, nightly-report$/,
  ],
  // A queue's partitions fire on their own: transfers due close together may run in any order.
  'idempotent-transfers.mjs': [
    /^t-[123]: ran$/,
    /^t-[123]: ran$/,
    /^t-[123]: ran$/,
    /^t-1 delivered again: t-1: duplicate$/,
    /^balances: 1=75 2=125$/,
    /^stats: ran 3, duplicates 1$/,
  ],
};

/** Examples that need a program the machine may lack; skipped (with a message) without it. */
const needs: Record<string, string> = {
  'redis-lock.mjs': 'redis-server',
  'idempotent-transfers.mjs': 'initdb',
};

const examples = readdirSync(join(root, 'examples')).filter((name) => name.endsWith('.mjs'));

function run(name: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [join('examples', name)],
      { cwd: root, timeout: 30_000, encoding: 'utf8' },
      (error, stdout, stderr) =>
        resolve({ code: error ? (error.code as number) : 0, stdout, stderr }),
    );
  });
}

describe('examples', () => {
  it('the package is built, so the examples can import it by name', () => {
    expect(
      existsSync(join(root, 'dist', 'index.js')),
      'run `npm run build` first (`npm test` does)',
    ).toBe(true);
  });

  it('has expectations for every example', () => {
    expect(examples.length).toBeGreaterThan(0);
    expect(examples.filter((name) => !(name in expected))).toEqual([]);
  });

  for (const name of examples) {
    const program = needs[name];
    const missing =
      program === 'initdb'
        ? !process.env.DATABASE_URL && !postgresInstalled()
        : program !== undefined &&
          !process.env.REDIS_URL &&
          spawnSync(program, ['--version']).status !== 0;
    if (missing) console.warn(`${program} is not installed: skipping examples/${name}`);

    it.skipIf(missing)(
      `node examples/${name} ends by itself and prints what it promises`,
      async () => {
        const { code, stdout, stderr } = await run(name);
        expect(code, stderr).toBe(0);
        const lines = stdout.split('\n');
        let at = 0;
        for (const pattern of expected[name] ?? []) {
          const found = lines.findIndex((line, index) => index >= at && pattern.test(line));
          expect(found, `${pattern} not found, in order, in:\n${stdout}`).toBeGreaterThanOrEqual(0);
          at = found + 1;
        }
      },
    );
  }
});
