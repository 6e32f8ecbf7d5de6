/**
 * POST /v1/topics/:topic/stream (docs/http-api.md, Stream deliveries): deliveries on one open
 * NDJSON response. At most `window` are in flight: an ack or nack of a receipt (on any
 * connection) or its visibility running out frees its slot. Messages taken for a client gone
 * before they were written are nacked back at once, as the long poll does.
 */

import type { FastifyInstance } from 'fastify';
import { DEFAULT_RECEIVE_BYTES } from '../../protocol/limits.js';
import type { StreamBody } from '../../protocol/wire.js';
import type { ServerContext } from '../context.js';
import { streamSchema } from '../schemas/messages.js';
import { drained, KEEP_ALIVE_MS, OpenStreams } from './open-streams.js';
import { handBack, toWire } from './wire.js';
import { Wake } from '../../wake.js';

/** Longest wait of one take, so that a stream notices its client gone or a server closing. */
const TAKE_SLICE_MS = 500;
const KEEP_ALIVE_LINE = '{"messages":[]}\n';

/** One open stream's deliveries in flight: receipt → when its visibility timeout runs out. */
export class StreamWindow {
  readonly inFlight = new Map<string, number>();
  /** Woken when a slot is freed. */
  readonly freed = new Wake();

  free(receipt: string): void {
    if (this.inFlight.delete(receipt)) this.freed.wake();
  }
}

/** Which open stream each delivery in flight on a stream belongs to. */
export class DeliveryStreams {
  private readonly owners = new Map<string, StreamWindow>();

  /** Deliveries in flight on all open streams. */
  get size(): number {
    return this.owners.size;
  }

  /** Free slots of `owner`, once those whose visibility ran out are freed (late acks free none). */
  freeSlots(owner: StreamWindow, window: number, now: number): number {
    if (owner.inFlight.size >= window) {
      for (const [receipt, until] of owner.inFlight) {
        if (until > now) continue;
        owner.inFlight.delete(receipt);
        this.owners.delete(receipt);
      }
    }
    return window - owner.inFlight.size;
  }

  /** Frees the slots of acked or nacked receipts (those of no stream are passed over). */
  release(receipts: readonly string[]): void {
    if (this.owners.size === 0) return;
    for (const receipt of receipts) {
      const owner = this.owners.get(receipt);
      if (owner === undefined) continue;
      this.owners.delete(receipt);
      owner.free(receipt);
    }
  }

  add(receipt: string, owner: StreamWindow, until: number): void {
    owner.inFlight.set(receipt, until);
    this.owners.set(receipt, owner);
  }

  /** A stream ended: its receipts no longer count against anything. */
  forget(owner: StreamWindow): void {
    for (const receipt of owner.inFlight.keys()) this.owners.delete(receipt);
    owner.inFlight.clear();
  }
}

/** Adds the stream route to the delivery routes' plugin (their acks and nacks free its slots). */
export function streamRoute(
  app: FastifyInstance,
  context: ServerContext,
  streams: DeliveryStreams,
): void {
  const open = new OpenStreams(app, context.metrics);

  app.post<{ Params: { topic: string }; Body: StreamBody }>(
    '/topics/:topic/stream',
    { schema: streamSchema },
    async (request, reply) => {
      const { topic } = request.params;
      const { window, visibilityMs, maxBytes = DEFAULT_RECEIVE_BYTES } = request.body;
      const { queue } = context;
      const controller = new AbortController();
      const signal = controller.signal;
      const end = () => controller.abort();
      const raw = open.open(reply, 'application/x-ndjson', end);
      // Named on every take, so that a slot is freed when the queue ends its delivery.
      const visibleFor = visibilityMs ?? queue.visibilityMs;
      const slots = new StreamWindow();
      let written = performance.now();
      try {
        // The first line says the stream is open, before anything is ready.
        raw.write(KEEP_ALIVE_LINE);
        while (!signal.aborted && !context.closing) {
          const now = performance.now();
          if (now - written >= KEEP_ALIVE_MS) {
            written = now;
            if (!raw.write(KEEP_ALIVE_LINE)) await drained(raw, signal);
          }
          const free = streams.freeSlots(slots, window, Date.now());
          if (free <= 0) {
            await slots.freed.wait(TAKE_SLICE_MS, signal);
            continue;
          }
          const taking = queue.receive(topic, {
            max: free,
            maxBytes,
            visibilityMs: visibleFor,
            waitMs: TAKE_SLICE_MS,
          });
          const messages = await untilAborted(taking, signal);
          if (messages === undefined || signal.aborted || raw.destroyed) {
            // Whatever the take brings (now or once it ends) goes back at once.
            void taking.then(
              (late) => handBack(queue, late),
              () => undefined,
            );
            break;
          }
          if (messages.length === 0) continue;
          const until = Date.now() + visibleFor;
          for (const message of messages) streams.add(message.receipt, slots, until);
          written = performance.now();
          const line = `${JSON.stringify({ messages: messages.map(toWire) })}\n`;
          if (!raw.write(line)) await drained(raw, signal);
        }
      } catch (err) {
        // A failed take (the queue closing, a store fault) ends the stream: the client reopens.
        request.log.warn({ err, topic }, 'delivery stream ended by a failed take');
      } finally {
        streams.forget(slots);
        open.close(raw, end);
      }
    },
  );
}

/** What `taking` resolves with, or undefined as soon as `signal` aborts (not after the slice). */
function untilAborted<T>(taking: Promise<T>, signal: AbortSignal): Promise<T | undefined> {
  if (signal.aborted) return Promise.resolve(undefined);
  let aborted = () => {};
  const abort = new Promise<undefined>((resolve) => {
    aborted = () => resolve(undefined);
    signal.addEventListener('abort', aborted, { once: true });
  });
  return Promise.race([taking, abort]).finally(() => signal.removeEventListener('abort', aborted));
}
