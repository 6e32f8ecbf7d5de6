/**
 * A cluster write that reached the primary but not the replica it waited for (durability
 * 'replicated', the replica stopped) answers 503 ERR_TICKWHEEL_NOT_DURABLE with outcome
 * 'unknown' and the id it was written under: the caller's own id, safe to send again
 * (retry 'same-id'), or the cluster's id of a message sent without one, to look up. A topic's
 * setting says the same with the topic's name.
 */

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DelayQueue } from '../../src/delay-queue.js';
import { createServer, type TickwheelServer } from '../../src/server/index.js';
import { injector } from '../server/harness.js';
// @ts-expect-error: a plain JavaScript module of the project's scripts.
import { installed, startReplicated } from '../../scripts/valkey.mjs';

describe.runIf(installed('valkey-server'))('a cluster write its replica never acknowledged', () => {
  let set: {
    primary: { url: string };
    replicas: Array<{ kill(): Promise<void> }>;
    stop(): Promise<void>;
  };
  let queue: DelayQueue;
  let server: TickwheelServer;
  let call: ReturnType<typeof injector>;

  beforeAll(async () => {
    set = await startReplicated({ binary: 'valkey-server', replicas: 1 });
    queue = await DelayQueue.open({
      redis: set.primary.url,
      queue: 'outcomes',
      durability: 'replicated',
    });
    server = await createServer({ queue, logLevel: 'silent' });
    call = injector(server);
    await set.replicas[0].kill();
  }, 60_000);

  afterAll(async () => {
    await server?.close();
    await queue?.close();
    await set?.stop();
  });

  it('answers NOT_DURABLE with outcome unknown: the caller id with retry same-id, the cluster id to look up', async () => {
    const mine = await call('POST', '/v1/topics/t/messages', {
      id: 'lonely',
      payload: 1,
      delayMs: 60_000,
    });
    expect(mine.status).toBe(503);
    expect(mine.body.error).toMatchObject({
      code: 'ERR_TICKWHEEL_NOT_DURABLE',
      outcome: 'unknown',
      id: 'lonely',
      retry: 'same-id',
    });

    const theirs = await call('POST', '/v1/topics/t/messages', { payload: 2, delayMs: 60_000 });
    expect(theirs.status).toBe(503);
    expect(theirs.body.error).toMatchObject({
      code: 'ERR_TICKWHEEL_NOT_DURABLE',
      outcome: 'unknown',
    });
    expect(theirs.body.error.id).toMatch(/^@/);
    expect(theirs.body.error).not.toHaveProperty('retry');

    // Both reached the primary.
    expect(await queue.get('lonely')).toMatchObject({ status: 'scheduled' });
    expect(await queue.get(theirs.body.error.id as string)).toMatchObject({ status: 'scheduled' });

    // Sent again with the same id: no second message (the same answer, for the same reason).
    const again = await call('POST', '/v1/topics/t/messages', {
      id: 'lonely',
      payload: 1,
      delayMs: 60_000,
    });
    expect(again.body.error).toMatchObject({ outcome: 'unknown', id: 'lonely' });
    expect((await queue.topicInfo('t')).pending).toBe(2);
  }, 30_000);

  it('says so of a durable ack, in words of an ack, its outcome unknown', async () => {
    await queue.schedule({ topic: 'acks', id: 'to-ack', payload: 1 }).catch(() => undefined);
    const [delivery] = await queue.receive('acks', { waitMs: 10_000 });
    expect(delivery?.id).toBe('to-ack');
    const err = (await queue
      .ack(delivery.receipt, { durable: true })
      .catch((e: unknown) => e)) as Error & { code?: string; outcome?: string };
    expect(err).toMatchObject({ code: 'ERR_TICKWHEEL_NOT_DURABLE', outcome: 'unknown' });
    expect(err.message).toMatch(/^the ack of to-ack reached the primary/);
    expect(err.message).not.toMatch(/schedul/);
  }, 30_000);

  it('says the same of a topic setting, with the topic', async () => {
    const paused = await call('PATCH', '/v1/topics/orders', { paused: true });
    expect(paused.status).toBe(503);
    expect(paused.body.error).toMatchObject({
      code: 'ERR_TICKWHEEL_NOT_DURABLE',
      outcome: 'unknown',
      id: 'orders',
      retry: 'same-id',
    });
  }, 30_000);
});
