/**
 * Opening a queue on Valkey/Redis with a wrong or missing password, or a database the server does
 * not have: refused at once with ERR_TICKWHEEL_INVALID_STATE naming the refusal (waiting does not
 * cure it), not retried until the connect timeout as an absent server is. A real valkey-server.
 */

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DelayQueue } from '../../src/delay-queue.js';
// @ts-expect-error: a plain JavaScript module of the project's scripts.
import { installed, startServer } from '../../scripts/valkey.mjs';

let server: { port: number; stop(): Promise<void> } | undefined;

describe.runIf(installed('valkey-server'))('a Valkey that refuses the connection', () => {
  beforeAll(async () => {
    server = await startServer({ args: ['--requirepass', 's3cret-pass'] });
  }, 30_000);
  afterAll(async () => {
    await server?.stop();
  });

  it('fails the open at once: wrong password, no password, a database out of range', async () => {
    const port = server?.port as number;
    for (const [redis, refusal] of [
      [`redis://:wrong@127.0.0.1:${port}`, /WRONGPASS/],
      [`redis://127.0.0.1:${port}`, /NOAUTH/],
      [`redis://:s3cret-pass@127.0.0.1:${port}/9999`, /DB index is out of range/],
    ] as const) {
      // Retried as an absent server is, it would take the whole minute.
      const err = (await DelayQueue.open({ redis, queue: 'q', connectTimeoutMs: 60_000 }).catch(
        (e: unknown) => e,
      )) as Error & { code?: string };
      expect(err.code, redis).toBe('ERR_TICKWHEEL_INVALID_STATE');
      expect(err.message).toMatch(refusal);
      expect(err.message).toMatch(/refused the connection/);
      expect(err.message).not.toContain('wrong@');
    }
    const queue = await DelayQueue.open({
      redis: `redis://:s3cret-pass@127.0.0.1:${port}`,
      queue: 'q',
    });
    await queue.close();
  }, 30_000);
});
