/**
 * The client's consume() source: the Worker's acks go to the server in batches, one request
 * (and one promise) per 10 ms window, at most 1000 receipts each.
 */

import { setImmediate as nextTurn } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { consumerSource } from '../../src/client/consumer.js';
import { checkConsumeOptions } from '../../src/queue/worker.js';

function transport(fail = false) {
  const requests: string[][] = [];
  return {
    requests,
    source: consumerSource(
      {
        openStream: () => Promise.reject(new Error('not used')),
        nack: () => Promise.resolve(true),
        ackMany: (receipts) => {
          requests.push(receipts);
          return fail
            ? Promise.reject(new Error('server down'))
            : Promise.resolve(receipts.map(() => true));
        },
      },
      'jobs',
      checkConsumeOptions({}),
    ),
  };
}

describe("the client consumer's acks", () => {
  it('made in one turn go in one request and share its promise', async () => {
    const { requests, source } = transport();
    const first = source.ack('r1');
    const second = source.ack('r2');
    expect(second).toBe(first);
    expect(requests).toEqual([]); // sent on the next turn, not at once
    await first;
    const third = source.ack('r3');
    expect(third).not.toBe(first);
    await third;
    expect(requests).toEqual([['r1', 'r2'], ['r3']]);
  });

  it('made in successive turns (handlers ending one by one) share a request', async () => {
    const { requests, source } = transport();
    const waits: Array<PromiseLike<unknown>> = [];
    for (let i = 0; i < 20; i++) {
      waits.push(source.ack(`r${i}`));
      await nextTurn();
    }
    await Promise.all(waits);
    expect(requests.flat()).toEqual(Array.from({ length: 20 }, (_, i) => `r${i}`));
    // 20 turns take well under the 10 ms window, unless the machine stalls the process.
    expect(requests.length).toBeLessThan(10);
  });

  it('go at most 1000 to a request, a full batch at once', async () => {
    const { requests, source } = transport();
    const waits = Array.from({ length: 2500 }, (_, i) => source.ack(`r${i}`));
    expect(new Set(waits).size).toBe(3);
    await Promise.all(waits);
    expect(requests.map((batch) => batch.length)).toEqual([1000, 1000, 500]);
    expect(requests.flat()).toEqual(Array.from({ length: 2500 }, (_, i) => `r${i}`));
  });

  it('share the failure of their request', async () => {
    const { source } = transport(true);
    const a = source.ack('r1');
    const b = source.ack('r2');
    await expect(a).rejects.toThrow('server down');
    await expect(b).rejects.toThrow('server down');
  });
});
