import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TickwheelClient } from '../../src/client/index.js';
import { PUSH_HEADER, verifyPush } from '../../src/protocol/push-signature.js';
import { startReceiver, type Receiver } from '../queue/push-receiver.js';
import { requireBuiltCli, startServer, type ServerProcess } from './process.js';
import { useTempDirs } from '../support/temp-dir.js';
import { waitFor } from '../support/wait-for.js';

const tempDir = useTempDirs('push-kill');

/**
 * Push delivery is at least once across a crash: a real `tickwheel serve` pushes to a real
 * receiver that answers some requests, holds others open and fails a few; the server is
 * SIGKILLed at a random point with requests under way, restarted on the same directory, and
 * every message that got a 201 is in the end answered 2xx by the receiver (attempts after the
 * first for those the kill cut), with none left pending.
 */

const MESSAGES = 80;
const SECRET = 'kill-test-secret-0123456789';
const dir = tempDir();
const servers: ServerProcess[] = [];
let receiver: Receiver | undefined;
beforeAll(() => requireBuiltCli());
afterAll(async () => {
  await Promise.all(servers.map((server) => server.kill()));
  await receiver?.close();
});

describe('push delivery across a SIGKILL of the server', () => {
  it('every acknowledged message is pushed and answered 2xx after the restart', async () => {
    const answered = new Set<string>();
    let crashed = false;
    receiver = await startReceiver((request, index) => {
      const id = String(request.headers[PUSH_HEADER.id]);
      // Before the kill: a third hang (cut by the kill), some fail, the rest succeed.
      if (!crashed && index % 3 === 0) return 'hang';
      if (!crashed && index % 7 === 1) return { status: 503, body: 'busy' };
      answered.add(id);
      return { status: 200, delayMs: 5 };
    });
    const first = await startServer([
      '--dir',
      dir,
      '--fsync',
      'batch',
      '--push-allow',
      '127.0.0.1',
    ]);
    servers.push(first);
    const client = new TickwheelClient({ url: first.url, retries: 0, timeoutMs: 5000 });
    await client.configureTopic('hooks', {
      push: { url: receiver.url, secret: SECRET, concurrency: 6, timeoutMs: 1_000 },
    });
    const acknowledged: string[] = [];
    for (let i = 0; i < MESSAGES; i++) {
      const id = `m${i}`;
      await client.schedule({
        topic: 'hooks',
        id,
        payload: { i },
        delayMs: Math.floor(Math.random() * 400),
        backoff: { type: 'fixed', delayMs: 100 },
        maxAttempts: 100,
      });
      acknowledged.push(id);
    }
    // Kill at a random point once pushes are under way (some answered, some held open).
    const killAfter = 10 + Math.floor(Math.random() * 40);
    await receiver.waitFor(killAfter, 20_000);
    expect(receiver.inFlight()).toBeGreaterThan(0);
    first.child.kill('SIGKILL');
    await first.exited;
    crashed = true;
    const before = answered.size;
    expect(before).toBeLessThan(MESSAGES);

    const second = await startServer([
      '--dir',
      dir,
      '--fsync',
      'batch',
      '--push-allow',
      '127.0.0.1',
    ]);
    servers.push(second);
    const after = new TickwheelClient({ url: second.url });
    // The target outlived the crash; the pushes resume by themselves.
    expect((await after.topicInfo('hooks')).push).toMatchObject({ url: `${receiver.url}/` });
    await waitFor(
      async () => answered.size === MESSAGES && (await after.topicInfo('hooks')).pending === 0,
      { timeoutMs: 60_000, intervalMs: 100 },
    ).catch(() => undefined);
    expect([...answered].sort()).toEqual([...acknowledged].sort());
    expect(await after.topicInfo('hooks')).toMatchObject({ pending: 0, dead: 0 });
    // Every request was signed; those the kill cut came again as later attempts.
    for (const request of receiver.requests) {
      expect(() => verifyPush(request, { secret: SECRET })).not.toThrow();
    }
    const retried = receiver.requests.filter((r) => Number(r.headers[PUSH_HEADER.attempt]) > 1);
    expect(retried.length).toBeGreaterThan(0);
    await second.kill();
  }, 120_000);
});
