/**
 * A server on Valkey while Valkey is down, and after it is back (a real valkey-server, crashed
 * with SIGKILL and started again on its data): /healthz answers 503 `unavailable` with the
 * reason, API calls answer 503 ERR_TICKWHEEL_UNAVAILABLE within the command timeout (never a
 * 500, never a hang), and once Valkey is back everything acknowledged before is there and the
 * server serves again.
 */

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createServer, type TickwheelServer } from '../../src/server/index.js';
// @ts-expect-error: a plain JavaScript module of the project's scripts.
import { installed, startServer } from '../../scripts/valkey.mjs';
import { waitFor } from '../support/wait-for.js';

describe.runIf(installed('valkey-server'))('a server on Valkey through an outage', () => {
  let valkey: {
    url: string;
    crash(): Promise<void>;
    restart(): Promise<void>;
    stop(): Promise<void>;
  };
  let server: TickwheelServer;

  const call = async (method: string, url: string, payload?: unknown) => {
    const res = await server.inject({ method: method as 'GET', url, payload: payload as object });
    return { status: res.statusCode, body: res.json() };
  };

  beforeAll(async () => {
    // Every write in the AOF at once, so that a SIGKILL loses nothing acknowledged here.
    valkey = await startServer({ args: ['--appendonly', 'yes', '--appendfsync', 'always'] });
    server = await createServer({
      redis: valkey.url,
      cluster: { queue: 'outage', partitions: 4, durability: 'async', leaseMs: 1_000 },
      logLevel: 'silent',
    });
    // Short bounds, so that the test sees them.
    const node = (
      server.queue as unknown as {
        backend: { driver: { valkey: { commandTimeoutMs: number; retryBudgetMs: number } } };
      }
    ).backend.driver;
    node.valkey.commandTimeoutMs = 2_000;
    node.valkey.retryBudgetMs = 2_000;
  }, 30_000);

  afterAll(async () => {
    await server?.close();
    await valkey?.stop();
  });

  it('says 503 unavailable while Valkey is down, and serves what it had once it is back', async () => {
    const scheduled = await call('POST', '/v1/topics/bills/messages', {
      id: 'bill-1',
      payload: { amount: 5 },
      delayMs: 60_000,
    });
    expect(scheduled.status).toBe(201);
    expect((await call('GET', '/healthz')).status).toBe(200);

    await valkey.crash();
    const health = await call('GET', '/healthz');
    expect(health.status).toBe(503);
    expect(health.body).toMatchObject({ status: 'unavailable' });
    expect(String(health.body.reason)).not.toBe('');

    const started = Date.now();
    const refused = await call('GET', '/v1/messages/bill-1');
    expect(refused.status).toBe(503);
    expect(refused.body.error.code).toBe('ERR_TICKWHEEL_UNAVAILABLE');
    expect(Date.now() - started).toBeLessThan(15_000);

    await valkey.restart();
    await waitFor(async () => (await call('GET', '/healthz')).status === 200, {
      timeoutMs: 20_000,
    });
    const info = await call('GET', '/v1/messages/bill-1');
    expect(info.status).toBe(200);
    expect(info.body).toMatchObject({ id: 'bill-1', status: 'scheduled' });
  }, 60_000);
});
