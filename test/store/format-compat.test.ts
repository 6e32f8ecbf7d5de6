/**
 * Data directories written by tickwheel 0.1.0 (test/fixtures/data-v1, made by
 * make-data-v1.mjs with that version's build) open with today's code: every message is where
 * that version left it, with its payload, and is delivered no earlier than it was due.
 */

import { cpSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/index.js';
import { DelayQueue, type ReceivedMessage } from '../../src/delay-queue.js';
import { useTempDirs } from '../support/temp-dir.js';

const tempDir = useTempDirs('compat');

const fixtures = resolve(dirname(fileURLToPath(import.meta.url)), '../fixtures/data-v1');
const YEAR = 365 * 86_400_000;

interface Expected {
  closedAt: number;
  messages: Record<
    string,
    {
      id: string;
      topic: string;
      status: string;
      deliverAt: number;
      attempts: number;
      payload: { json?: unknown; base64?: string };
    }
  >;
}

const queues: DelayQueue[] = [];
afterEach(async () => {
  for (const queue of queues.splice(0)) await queue.close();
});

async function openCopy(variant: string, at: number): Promise<DelayQueue> {
  const dir = tempDir();
  cpSync(join(fixtures, variant), dir, { recursive: true });
  const queue = await DelayQueue.open({ dir, clock: new ManualClock(at), horizonMs: 1000 });
  queues.push(queue);
  return queue;
}

function payloadOf(message: ReceivedMessage): { json?: unknown; base64?: string } {
  return message.payload instanceof Uint8Array
    ? { base64: Buffer.from(message.payload).toString('base64') }
    : { json: message.payload };
}

async function receiveAll(queue: DelayQueue, topics: string[]): Promise<ReceivedMessage[]> {
  const all: ReceivedMessage[] = [];
  for (const topic of topics) all.push(...(await queue.receive(topic, { max: 1000 })));
  return all;
}

describe.each(['snapshot', 'replay'])('a 0.1.0 data directory (%s)', (variant) => {
  const expected = JSON.parse(
    readFileSync(join(fixtures, `${variant}.expected.json`), 'utf8'),
  ) as Expected;
  const all = Object.values(expected.messages);
  const pending = all.filter((m) => ['scheduled', 'ready', 'inflight'].includes(m.status));
  const topics = [...new Set(all.map((m) => m.topic))];

  it('opens with every message as that version left it', async () => {
    const queue = await openCopy(variant, expected.closedAt + 1);
    expect(queue.recovery).toBeDefined();
    for (const message of all) {
      const now = await queue.get(message.id);
      if (message.status === 'acked' || message.status === 'cancelled') {
        // Finished messages are forgotten across a restart, or reported as finished.
        if (now !== undefined) expect(now.status).toBe(message.status);
        continue;
      }
      expect(now, message.id).toMatchObject({
        id: message.id,
        topic: message.topic,
        deliverAt: message.deliverAt,
      });
      // A delivery in flight at close was never recorded: its attempt is not counted again.
      const attempts = message.status === 'inflight' ? message.attempts - 1 : message.attempts;
      expect(now!.attempts, message.id).toBe(attempts);
      if (message.status === 'dead') expect(now!.status).toBe('dead');
      else expect(['scheduled', 'ready']).toContain(now!.status);
    }
    const dead = await queue.deadLetters('near');
    expect(dead.map((m) => m.id).sort()).toEqual(
      all.filter((m) => m.status === 'dead').map((m) => m.id),
    );
  });

  it('delivers what was due by then, with its payload, and nothing due later', async () => {
    const at = expected.closedAt + 10_000;
    const queue = await openCopy(variant, at);
    const got = await receiveAll(queue, topics);
    const due = pending.filter((m) => m.deliverAt <= at);
    expect(got.map((m) => m.id).sort()).toEqual(due.map((m) => m.id).sort());
    for (const message of got) {
      expect(payloadOf(message)).toEqual(expected.messages[message.id].payload);
      expect(message.deliverAt).toBeLessThanOrEqual(at);
    }
  });

  it('delivers every pending message, years ahead included, each with its payload', async () => {
    const queue = await openCopy(variant, expected.closedAt + 6 * YEAR);
    const got = await receiveAll(queue, topics);
    expect(got.map((m) => m.id).sort()).toEqual(pending.map((m) => m.id).sort());
    for (const message of got) {
      expect(payloadOf(message)).toEqual(expected.messages[message.id].payload);
      expect(message.deliverAt).toBe(expected.messages[message.id].deliverAt);
    }
  });
});
