/**
 * What a node does while it opens is told like the rest: deliveries whose visibility ran out
 * and messages it fires as it takes its partitions over count in stats(), on a real Valkey
 * after a node closed with them out or due.
 */

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DelayQueue } from '../../src/delay-queue.js';
// @ts-expect-error: a plain JavaScript module of the project's scripts.
import { installed, startServer } from '../../scripts/valkey.mjs';
import { waitFor } from '../support/wait-for.js';

describe.runIf(installed('valkey-server'))('a node opening over messages already due', () => {
  let server: { url: string; stop(): Promise<void> };
  const options = () => ({ redis: server.url, queue: 'opening', partitions: 4, leaseMs: 1_000 });

  beforeAll(async () => {
    server = await startServer({ binary: 'valkey-server' });
  }, 30_000);

  afterAll(async () => {
    await server?.stop();
  });

  it('counts the deliveries whose visibility it finds run out as it opens', async () => {
    const first = await DelayQueue.open(options());
    await first.scheduleMany(Array.from({ length: 40 }, (_, i) => ({ topic: 'v', payload: i })));
    let taken = 0;
    await waitFor(async () => {
      taken += (await first.receive('v', { max: 100, visibilityMs: 200 })).length;
      return taken === 40;
    });
    const visibleAgainAt = Date.now() + 250;
    await first.close();
    await waitFor(() => Date.now() > visibleAgainAt);
    const second = await DelayQueue.open(options());
    try {
      let received = 0;
      await waitFor(async () => {
        received += (await second.receive('v', { max: 100 })).length;
        return received === 40;
      });
      expect((await second.stats()).expired).toBe(40);
    } finally {
      await second.close();
    }
  });

  it('counts the messages it fires while it opens', async () => {
    const first = await DelayQueue.open(options());
    const deliverAt = Date.now() + 300;
    await first.scheduleMany(
      Array.from({ length: 40 }, (_, i) => ({ topic: 't', payload: i, deliverAt })),
    );
    await first.close();
    await waitFor(() => Date.now() > deliverAt + 50);
    const second = await DelayQueue.open(options());
    try {
      let received = 0;
      await waitFor(async () => {
        received += (await second.receive('t', { max: 100 })).length;
        return received === 40;
      });
      expect((await second.stats()).fired).toBe(40);
    } finally {
      await second.close();
    }
  });
});
