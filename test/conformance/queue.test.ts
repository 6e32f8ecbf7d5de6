/**
 * The `Queue` contract (src/queue/api.ts), one specification run on every backend
 * (backends.ts): the embedded queue on a memory store and on a data directory, and the queue on
 * a standalone Valkey, on a Valkey Cluster and on Redis 7 (behaviour.test.ts has the rest). Whatever holds the messages, a call with bad arguments is refused with the same
 * error code, and stats() counts the same sequence of operations the same way. A difference
 * that has a reason is in docs/cluster.md ("Differences from the embedded queue") and asserted
 * here as such.
 */

import { afterEach, describe, expect, it } from 'vitest';
import type { Queue } from '../../src/queue/api.js';
import type { ReceivedMessage } from '../../src/queue/types.js';
import { backends, closeAll, codeOf, useBackends } from './backends.js';

useBackends();

const TOPIC = 'ERR_TICKWHEEL_INVALID_TOPIC';
const ID = 'ERR_TICKWHEEL_INVALID_ID';
const DELAY = 'ERR_TICKWHEEL_INVALID_DELAY';
const MESSAGE = 'ERR_TICKWHEEL_INVALID_MESSAGE';
const OPTION = 'ERR_TICKWHEEL_INVALID_OPTION';

type Call = (queue: Queue) => unknown;
const anyQueue = (queue: Queue) =>
  queue as unknown as Record<string, (...args: unknown[]) => unknown>;

/** Calls with bad arguments and the code each is refused with, on every backend. */
const refused: Array<[string, Call, string]> = [
  ['schedule: not an object', (q) => anyQueue(q).schedule(null), MESSAGE],
  ['schedule: bad topic', (q) => q.schedule({ topic: 'no spaces', payload: 1 }), TOPIC],
  ['schedule: no topic', (q) => anyQueue(q).schedule({ payload: 1 }), TOPIC],
  ['schedule: bad id', (q) => q.schedule({ topic: 't', id: 'a b', payload: 1 }), ID],
  ['schedule: empty id', (q) => q.schedule({ topic: 't', id: '', payload: 1 }), ID],
  ['schedule: NaN delay', (q) => q.schedule({ topic: 't', payload: 1, delayMs: NaN }), DELAY],
  [
    'schedule: delay as text',
    (q) => anyQueue(q).schedule({ topic: 't', payload: 1, delayMs: '5' }),
    DELAY,
  ],
  [
    'schedule: deliverAt in seconds',
    (q) => q.schedule({ topic: 't', payload: 1, deliverAt: 1.7e9 }),
    DELAY,
  ],
  [
    'schedule: deliverAt negative',
    (q) => q.schedule({ topic: 't', payload: 1, deliverAt: -1 }),
    DELAY,
  ],
  [
    'schedule: payload an ArrayBuffer',
    (q) => q.schedule({ topic: 't', payload: new ArrayBuffer(4) }),
    MESSAGE,
  ],
  [
    'schedule: payload a Float64Array',
    (q) => q.schedule({ topic: 't', payload: new Float64Array([1.5]) }),
    MESSAGE,
  ],
  [
    'schedule: payload a Map',
    (q) => q.schedule({ topic: 't', payload: new Map([[1, 2]]) }),
    MESSAGE,
  ],
  [
    'schedule: delayMs and deliverAt',
    (q) => q.schedule({ topic: 't', payload: 1, delayMs: 1, deliverAt: Date.now() }),
    MESSAGE,
  ],
  [
    'schedule: unknown field',
    (q) => anyQueue(q).schedule({ topic: 't', payload: 1, delay: 5 }),
    MESSAGE,
  ],
  ['schedule: function payload', (q) => q.schedule({ topic: 't', payload: () => 1 }), MESSAGE],
  [
    'schedule: maxAttempts 0',
    (q) => q.schedule({ topic: 't', payload: 1, maxAttempts: 0 }),
    MESSAGE,
  ],
  ['scheduleMany: not an array', (q) => anyQueue(q).scheduleMany('x'), MESSAGE],
  [
    'scheduleMany: one bad topic',
    (q) =>
      q.scheduleMany([
        { topic: 't', payload: 1 },
        { topic: 'no spaces', payload: 1 },
      ]),
    TOPIC,
  ],
  [
    'scheduleMany: one bad delay',
    (q) => q.scheduleMany([{ topic: 't', payload: 1, delayMs: NaN }]),
    DELAY,
  ],
  ['get: bad id', (q) => q.get('a b'), ID],
  ['schedule: id .', (q) => q.schedule({ topic: 't', id: '.', payload: 1 }), ID],
  ['schedule: id ..', (q) => q.schedule({ topic: 't', id: '..', payload: 1 }), ID],
  ['get: id ..', (q) => q.get('..'), ID],
  ['cancel: id .', (q) => q.cancel('.'), ID],
  ['get: number id', (q) => anyQueue(q).get(5), ID],
  ['cancel: bad id', (q) => q.cancel(''), ID],
  ['reschedule: bad id', (q) => q.reschedule('a b', { delayMs: 1 }), ID],
  ['reschedule: {}', (q) => q.reschedule('x', {}), MESSAGE],
  ['reschedule: a number', (q) => anyQueue(q).reschedule('x', 5), MESSAGE],
  ['reschedule: null', (q) => anyQueue(q).reschedule('x', null), MESSAGE],
  ['reschedule: NaN delay', (q) => q.reschedule('x', { delayMs: NaN }), DELAY],
  ['reschedule: both', (q) => q.reschedule('x', { delayMs: 1, deliverAt: Date.now() }), MESSAGE],
  ['reschedule: deliverAt in seconds', (q) => q.reschedule('x', { deliverAt: 1.7e9 }), DELAY],
  ['rescheduleTo: {}', (q) => q.rescheduleTo('x', {}), MESSAGE],
  ['rescheduleTo: null', (q) => anyQueue(q).rescheduleTo('x', null), MESSAGE],
  ['requeue: bad id', (q) => q.requeue('a b'), ID],
  ['requeue: NaN delay', (q) => q.requeue('x', { delayMs: NaN }), DELAY],
  ['requeue: options null', (q) => anyQueue(q).requeue('x', null), OPTION],
  ['requeue: unknown option', (q) => anyQueue(q).requeue('x', { delay: 5 }), OPTION],
  [
    'schedule: payload over 1 MiB',
    (q) => q.schedule({ topic: 't', payload: 'x'.repeat(2 << 20) }),
    'ERR_TICKWHEEL_PAYLOAD_TOO_LARGE',
  ],
  ['payloadPreview: maxChars 0', (q) => q.payloadPreview('x', 0), OPTION],
  ['dueTimeline: not an array', (q) => anyQueue(q).dueTimeline(5), OPTION],
  ['dueTimeline: a negative edge', (q) => q.dueTimeline([-1]), OPTION],
  ['receive: max 1001', (q) => q.receive('t', { max: 1001 }), OPTION],
  ['receive: unknown option', (q) => anyQueue(q).receive('t', { wait: 5 }), OPTION],
  ['consume: concurrency 0', (q) => q.consume('t', () => {}, { concurrency: 0 }), OPTION],
  ['consume: prefetch 1001', (q) => q.consume('t', () => {}, { prefetch: 1001 }), OPTION],
  ['consume: prefetch -1', (q) => q.consume('t', () => {}, { prefetch: -1 }), OPTION],
  ['getSchedule: bad name', (q) => q.getSchedule('a b'), OPTION],
  ['deleteSchedule: bad name', (q) => q.deleteSchedule('a b'), OPTION],
  ['updateSchedule: patch null', (q) => anyQueue(q).updateSchedule('n', null), OPTION],
  ['payloadPreview: bad id', (q) => q.payloadPreview('a b'), ID],
  ['receive: bad topic', (q) => q.receive('no spaces'), TOPIC],
  ['receive: max 0', (q) => q.receive('t', { max: 0 }), OPTION],
  ['receive: max 1.5', (q) => q.receive('t', { max: 1.5 }), OPTION],
  ['receive: waitMs -1', (q) => q.receive('t', { waitMs: -1 }), OPTION],
  ['receive: visibilityMs 0', (q) => q.receive('t', { visibilityMs: 0 }), OPTION],
  ['receive: visibilityMs 25 h', (q) => q.receive('t', { visibilityMs: 25 * 3_600_000 }), OPTION],
  [
    'receive: signal not an AbortSignal',
    (q) => anyQueue(q).receive('t', {}, { signal: { aborted: false } }),
    OPTION,
  ],
  ['receive: unknown call option', (q) => anyQueue(q).receive('t', {}, { timeout: 5 }), OPTION],
  ['receive: call options null', (q) => anyQueue(q).receive('t', {}, null), OPTION],
  ['ack: number receipt', (q) => anyQueue(q).ack(5), MESSAGE],
  ['nack: number receipt', (q) => anyQueue(q).nack(5), MESSAGE],
  ['nack: receipt null', (q) => anyQueue(q).nack(null, { delayMs: 5 }), MESSAGE],
  ['receive: visibilityMs 13 h', (q) => q.receive('t', { visibilityMs: 13 * 3_600_000 }), OPTION],
  ['nack: NaN delay', (q) => q.nack('r', { delayMs: NaN }), OPTION],
  ['nack: reason a number', (q) => anyQueue(q).nack('r', { reason: 5 }), OPTION],
  ['ackMany: not an array', (q) => anyQueue(q).ackMany('r'), MESSAGE],
  ['ackMany: a number receipt', (q) => anyQueue(q).ackMany([5]), MESSAGE],
  ['nackMany: not an array', (q) => anyQueue(q).nackMany('r'), MESSAGE],
  ['nackMany: reason a number', (q) => anyQueue(q).nackMany(['r'], { reason: 5 }), OPTION],
  ['deadLetters: bad topic', (q) => q.deadLetters('no spaces'), TOPIC],
  ['deadLetters: limit 0', (q) => q.deadLetters('t', 0), OPTION],
  ['deadLetters: limit 1.5', (q) => q.deadLetters('t', 1.5), OPTION],
  ['consume: bad topic', (q) => q.consume('no spaces', async () => {}), TOPIC],
  ['consume: no handler', (q) => anyQueue(q).consume('t', 5), 'ERR_TICKWHEEL_INVALID_CALLBACK'],
  ['configureTopic: bad topic', (q) => q.configureTopic('no spaces', { paused: true }), TOPIC],
  [
    'configureTopic: paused as text',
    (q) => anyQueue(q).configureTopic('t', { paused: 'yes' }),
    OPTION,
  ],
  ['topicInfo: bad topic', (q) => q.topicInfo('no spaces'), TOPIC],
  ['putSchedule: bad name', (q) => q.putSchedule('a b', { topic: 't', everyMs: 1_000 }), OPTION],
  [
    'putSchedule: neither cron nor everyMs',
    (q) => anyQueue(q).putSchedule('n', { topic: 't' }),
    OPTION,
  ],
  ['putSchedule: everyMs 0', (q) => q.putSchedule('n', { topic: 't', everyMs: 0 }), OPTION],
  [
    'putSchedule: bad topic',
    (q) => q.putSchedule('n', { topic: 'no spaces', everyMs: 1_000 }),
    TOPIC,
  ],
  ['putSchedule: bad cron', (q) => q.putSchedule('n', { topic: 't', cron: 'nonsense' }), OPTION],
  ['putSchedule: not an object', (q) => anyQueue(q).putSchedule('n', null), OPTION],
];

/** Calls the contract answers without an error (nothing by that id, negative delays clamp). */
const answered: Array<[string, Call, unknown]> = [
  ['reschedule: unknown id, negative delay', (q) => q.reschedule('x', { delayMs: -5 }), false],
  ['rescheduleTo: unknown id', (q) => q.rescheduleTo('x', { delayMs: 5 }), undefined],
  ['cancel: unknown id', (q) => q.cancel('x'), false],
  ['requeue: unknown id', (q) => q.requeue('x'), false],
  ['get: unknown id', (q) => q.get('x'), undefined],
  ['ack: unknown receipt', (q) => q.ack('not-a-receipt'), false],
  ['nack: unknown receipt', (q) => q.nack('not-a-receipt'), false],
  ['ackMany: unknown receipts', (q) => q.ackMany(['r1', 'r2']), [false, false]],
  ['deadLetters: none', (q) => q.deadLetters('t'), []],
  ['scheduleMany: empty', (q) => q.scheduleMany([]), []],
];

/** Receives from `topic` until `count` messages came (each receive long-polls). */
async function receiveAll(queue: Queue, topic: string, count: number): Promise<ReceivedMessage[]> {
  const got: ReceivedMessage[] = [];
  while (got.length < count) got.push(...(await queue.receive(topic, { max: 10, waitMs: 5_000 })));
  return got;
}

describe.each(backends)('Queue contract on $name', (backend) => {
  afterEach(closeAll);

  it('refuses bad arguments with the same codes', async () => {
    const queue = await backend.open();
    const found: Record<string, string> = {};
    const wanted: Record<string, string> = {};
    for (const [label, call, code] of refused) {
      found[label] = await codeOf(() => call(queue));
      wanted[label] = code;
    }
    expect(found).toEqual(wanted);
    // Nothing of a refused batch was scheduled.
    expect(await queue.topicInfo('t')).toMatchObject({ pending: 0 });
  });

  it('answers calls about nothing the same way', async () => {
    const queue = await backend.open();
    const found: Record<string, unknown> = {};
    const wanted: Record<string, unknown> = {};
    for (const [label, call, answer] of answered) {
      found[label] = await call(queue);
      wanted[label] = answer;
    }
    expect(found).toEqual(wanted);
  });

  it('counts a scripted sequence in stats()', async () => {
    const queue = await backend.open();
    await queue.schedule({ topic: 't', id: 'a', payload: 1 });
    await queue.schedule({ topic: 't', id: 'a', payload: 1 }); // the same id: deduplicated
    await queue.schedule({ topic: 't', id: 'b', payload: 2, maxAttempts: 1 });
    await queue.schedule({ topic: 'later', id: 'c', payload: 3, delayMs: 60_000 });
    expect(await queue.reschedule('c', { delayMs: 120_000 })).toBe(true);
    expect(await queue.cancel('c')).toBe(true);
    const got = await receiveAll(queue, 't', 2);
    const byId = new Map(got.map((message) => [message.id, message.receipt]));
    expect(await queue.ack(byId.get('a')!)).toBe(true);
    expect(await queue.nack(byId.get('b')!, { reason: 'no' })).toBe(true);
    expect(await queue.get('b')).toMatchObject({ status: 'dead', lastError: 'no' });
    const stats = await queue.stats();
    const counters = Object.fromEntries(
      (
        [
          'scheduled',
          'deduplicated',
          'fired',
          'delivered',
          'acked',
          'nacked',
          'dead',
          'cancelled',
          'rescheduled',
        ] as const
      ).map((key) => [key, stats[key]]),
    );
    expect(counters).toEqual({
      scheduled: 3,
      deduplicated: 1,
      fired: 2,
      delivered: 2,
      acked: 1,
      nacked: 1,
      dead: 1,
      cancelled: 1,
      rescheduled: 1,
    });
  });

  it('ends a long poll when its signal aborts, and takes nothing once aborted', async () => {
    const queue = await backend.open();
    // Waiting on an empty topic: the abort ends the wait (else it would outlast the test).
    const controller = new AbortController();
    const waiting = queue.receive('quiet', { waitMs: 60_000 }, { signal: controller.signal });
    setTimeout(() => controller.abort(new Error('shutting down')), 20);
    await expect(waiting).rejects.toMatchObject({ name: 'AbortError', code: 'ABORT_ERR' });
    // Aborted before the call: refused, the ready message left for the next receive.
    await queue.schedule({ topic: 'ready', id: 'm', payload: 1 });
    const aborted = AbortSignal.abort();
    await expect(
      queue.receive('ready', { waitMs: 5_000 }, { signal: aborted }),
    ).rejects.toMatchObject({ code: 'ABORT_ERR' });
    const got = await receiveAll(queue, 'ready', 1);
    expect(got.map((message) => [message.id, message.attempts])).toEqual([['m', 1]]);
    // A signal that never aborts changes nothing.
    await queue.schedule({ topic: 'ready', id: 'n', payload: 2 });
    const live = new AbortController().signal;
    const next = await queue.receive('ready', { waitMs: 5_000 }, { signal: live });
    expect(next.map((message) => message.id)).toEqual(['n']);
  });

  it('counts topics named like members of Object.prototype, and changes no builtin', async () => {
    const queue = await backend.open();
    const names = ['constructor', 'toString', 'valueOf', 'hasOwnProperty'];
    for (const topic of names) {
      await queue.schedule({ topic, payload: 1, delayMs: 60_000 });
    }
    const { topics } = await queue.stats();
    for (const topic of names) {
      expect(Object.hasOwn(topics, topic), topic).toBe(true);
      expect(topics[topic], topic).toMatchObject({ scheduled: 1, ready: 0, inflight: 0 });
    }
    expect(Object.keys(topics).sort()).toEqual([...names].sort());
    expect('scheduled' in Object).toBe(false);
    expect('scheduled' in Object.prototype.valueOf).toBe(false);
  });
});
