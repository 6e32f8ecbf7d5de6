import { once } from 'node:events';
import { createConnection, createServer, type Socket } from 'node:net';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { waitFor } from '../support/wait-for.js';
import { Heartbeat, ManualClock, SystemClock, type HeartbeatOptions } from '../../src/index.js';

function heartbeat(options: Partial<HeartbeatOptions<string>> = {}) {
  const clock = new ManualClock();
  const log: string[] = [];
  const beats = new Heartbeat<string>({
    clock,
    intervalMs: 100,
    send: (item, attempt) => log.push(`${clock.now()} send ${item} #${attempt}`),
    onDead: (item) => log.push(`${clock.now()} dead ${item}`),
    ...options,
  });
  return { clock, beats, log };
}

describe('Heartbeat', () => {
  it('sends a heartbeat per quiet interval and gives up after maxMissed unanswered ones', () => {
    const { clock, beats, log } = heartbeat();
    const a = beats.track('a');
    clock.advance(1000);
    expect(log).toEqual(['100 send a #1', '200 send a #2', '300 send a #3', '400 dead a']);
    expect(beats.has(a)).toBe(false);
    expect(beats.received(a)).toBe(false);
    expect(beats.size).toBe(0);
  });

  it('starts counting afresh on any read: a reply, or data', () => {
    const { clock, beats, log } = heartbeat();
    const a = beats.track('a');
    clock.advance(250); // sent #1 at 100, #2 at 200
    beats.received(a); // the reply to #2 arrives at 250
    clock.advance(350);
    expect(log).toEqual([
      '100 send a #1',
      '200 send a #2',
      '350 send a #1',
      '450 send a #2',
      '550 send a #3',
    ]);
    clock.advance(100);
    expect(log.at(-1)).toBe('650 dead a');
  });

  it('never bothers a peer that keeps talking', () => {
    const { clock, beats, log } = heartbeat();
    const a = beats.track('a');
    for (let t = 0; t < 100; t++) {
      clock.advance(60);
      beats.received(a);
    }
    expect(log).toEqual([]);
    expect(beats.has(a)).toBe(true);
  });

  it('with maxMissed 0 is a plain read timeout: no heartbeat, given up after one interval', () => {
    const { clock, beats, log } = heartbeat({ maxMissed: 0 });
    beats.track('a');
    clock.advance(1000);
    expect(log).toEqual(['100 dead a']);
  });

  it('counts a heartbeat whose send threw or rejected as sent, and reports the error', async () => {
    const errors: string[] = [];
    const { clock, beats, log } = heartbeat({
      onError: (err) => errors.push((err as Error).message),
      send: (item, attempt) => {
        log.push(`${clock.now()} send ${item} #${attempt}`);
        if (attempt === 1) throw new Error('socket not writable');
        return Promise.reject(new Error('write failed'));
      },
    });
    beats.track('a');
    clock.advance(1000);
    await new Promise((resolve) => setImmediate(resolve));
    expect(log).toEqual(['100 send a #1', '200 send a #2', '300 send a #3', '400 dead a']);
    expect(errors).toEqual(['socket not writable', 'write failed', 'write failed']);
  });

  it('reports an onDead that throws and carries on with the other items', () => {
    const errors: unknown[] = [];
    const { clock, beats, log } = heartbeat({
      maxMissed: 0,
      onError: (err) => errors.push(err),
      onDead: (item) => {
        log.push(`${clock.now()} dead ${item}`);
        throw new Error('close failed');
      },
    });
    beats.track('a');
    beats.track('b');
    clock.advance(100);
    expect(log).toEqual(['100 dead a', '100 dead b']);
    expect(errors).toHaveLength(2);
    expect(beats.size).toBe(0);
  });

  it('refuses a non-positive interval, a bad maxMissed and missing callbacks', () => {
    const base = { intervalMs: 100, send: () => {}, onDead: () => {} };
    for (const intervalMs of [0, -5, NaN, Infinity]) {
      expect(() => new Heartbeat({ ...base, intervalMs })).toThrowError(
        expect.objectContaining({
          code: 'ERR_TICKWHEEL_INVALID_OPTION',
          message: expect.stringContaining('intervalMs'),
        }),
      );
    }
    for (const maxMissed of [-1, 1.5, NaN]) {
      expect(() => new Heartbeat({ ...base, maxMissed })).toThrowError(
        expect.objectContaining({ code: 'ERR_TICKWHEEL_INVALID_OPTION' }),
      );
    }
    expect(() => new Heartbeat({ ...base, send: undefined as never })).toThrowError(
      expect.objectContaining({ code: 'ERR_TICKWHEEL_INVALID_CALLBACK' }),
    );
  });

  it('refuses missing options, or options that are not an object, with a coded error', () => {
    for (const options of [undefined, null, 100]) {
      expect(() => new Heartbeat(options as never)).toThrowError(
        expect.objectContaining({
          name: 'TickwheelTypeError',
          code: 'ERR_TICKWHEEL_INVALID_OPTION',
          message: expect.stringMatching(/^Heartbeat options must be an object/),
        }),
      );
    }
  });

  it('untracks and closes quietly', () => {
    const { clock, beats, log } = heartbeat();
    const a = beats.track('a');
    beats.track('b');
    expect(beats.untrack(a)).toBe(true);
    clock.advance(100);
    expect(log).toEqual(['100 send b #1']);
    beats.close();
    clock.advance(1000);
    expect(log).toEqual(['100 send b #1']);
    expect(beats.size).toBe(0);
  });

  it('gives up exactly (maxMissed + 1) intervals after the peer was last heard from', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 200 }),
        fc.integer({ min: 0, max: 5 }),
        // Times (after the previous one) at which the peer is heard from, then silence.
        fc.array(fc.integer({ min: 0, max: 400 }), { maxLength: 15 }),
        (intervalMs, maxMissed, gaps) => {
          const { clock, beats, log } = heartbeat({ intervalMs, maxMissed });
          const a = beats.track('a');
          let heard = 0;
          for (const gap of gaps) {
            clock.advance(gap);
            if (!beats.received(a)) break;
            heard = clock.now();
          }
          clock.advance((maxMissed + 2) * intervalMs);
          // Since the last read: heartbeats 1..maxMissed at each interval, then onDead.
          const tail = Array.from(
            { length: maxMissed },
            (_, i) => `${heard + (i + 1) * intervalMs} send a #${i + 1}`,
          );
          tail.push(`${heard + (maxMissed + 1) * intervalMs} dead a`);
          expect(log.slice(-tail.length)).toEqual(tail);
          expect(log.filter((line) => line.includes('dead'))).toHaveLength(1);
        },
      ),
      { numRuns: 300 },
    );
  });
});

describe('Heartbeat on real sockets', () => {
  it('keeps the peer that answers and drops the one that does not', async () => {
    const clock = new SystemClock();
    const deadAt = new Map<string, number>();
    const heardAt = new Map<string, number>();
    let pongs = 0;
    type Conn = Socket & { peer?: string };
    const beats = new Heartbeat<Conn>({
      clock,
      intervalMs: 60,
      maxMissed: 2,
      send: (socket) => socket.write('ping\n'),
      onDead: (socket) => {
        deadAt.set(socket.peer!, clock.now());
        socket.destroy();
      },
    });
    const server = createServer((socket: Conn) => {
      const handle = beats.track(socket);
      socket.on('data', (chunk) => {
        socket.peer ??= chunk.toString().split('\n')[0];
        heardAt.set(socket.peer, clock.now());
        pongs += chunk.toString().split('pong\n').length - 1;
        beats.received(handle);
      });
      socket.on('close', () => beats.untrack(handle));
      socket.on('error', () => {});
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const { port } = server.address() as { port: number };

    const polite = createConnection(port, '127.0.0.1');
    const mute = createConnection(port, '127.0.0.1');
    for (const socket of [polite, mute]) socket.on('error', () => {});
    polite.write('polite\n');
    mute.write('mute\n');
    polite.on('data', () => polite.write('pong\n')); // answers every heartbeat
    mute.resume(); // reads, but never answers
    await once(mute, 'close');
    // Given up (maxMissed + 1) * intervalMs = 180 ms after it was last heard from.
    const silentFor = deadAt.get('mute')! - heardAt.get('mute')!;
    expect(silentFor).toBeGreaterThanOrEqual(180 - 1);
    expect(silentFor).toBeLessThan(2000);
    // The polite one answers as many more heartbeats as it would take to give it up.
    const before = pongs;
    await waitFor(() => pongs >= before + 3);
    expect(deadAt.has('polite')).toBe(false);
    expect(beats.size).toBe(1);
    polite.destroy();
    beats.close();
    server.close();
  });
});
