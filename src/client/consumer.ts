/**
 * consume() over HTTP: long-poll for messages, run the handler on up to `concurrency` at once,
 * ack when it resolves, nack when it throws. Acks of handlers that finish together go to the
 * server in one request (AckBatcher). Receive errors (server restarting, network trouble) are
 * reported and retried with backoff; the consumer only stops on close().
 */

import { setTimeout as sleep } from 'node:timers/promises';
import type { MessageHandler, ReceivedMessage } from '../queue/delay-queue.js';

export interface ClientConsumeOptions {
  /** Handlers running at once. Default 1, at most 1000. */
  concurrency?: number;
  /** Visibility timeout of each delivery. Default: the server queue's. */
  visibilityMs?: number;
  /** Long-poll wait of each receive. Default 20,000 ms (the server caps it). */
  waitMs?: number;
  /** Handler and transport errors. Default: a process warning. */
  onError?: (err: unknown, message?: ReceivedMessage) => void;
}

export interface Consumer {
  /** Stops receiving, waits for running handlers and their acks. */
  close(): Promise<void>;
}

/** What the consumer needs from the client. */
export interface ConsumerTransport {
  receive(
    topic: string,
    options: { max: number; waitMs: number; visibilityMs?: number },
    signal: AbortSignal,
  ): Promise<ReceivedMessage[]>;
  ackMany(receipts: string[]): Promise<boolean[]>;
  nack(receipt: string): Promise<boolean>;
}

const MAX_ACK_BATCH = 1000;

/** Collects acks made in the same turn of the event loop into one request. */
class AckBatcher {
  private pending: Array<{ receipt: string; settle: (err: unknown, acked?: boolean) => void }> = [];
  private scheduled = false;
  private inFlight = new Set<Promise<void>>();

  constructor(private readonly send: (receipts: string[]) => Promise<boolean[]>) {}

  ack(receipt: string): Promise<boolean> {
    return new Promise((resolve, reject) => {
      this.pending.push({
        receipt,
        settle: (err, acked) => (err === undefined ? resolve(acked === true) : reject(err)),
      });
      if (this.pending.length >= MAX_ACK_BATCH) this.flush();
      else if (!this.scheduled) {
        this.scheduled = true;
        setImmediate(() => this.flush());
      }
    });
  }

  private flush(): void {
    this.scheduled = false;
    const batch = this.pending;
    if (batch.length === 0) return;
    this.pending = [];
    const sent = this.send(batch.map((entry) => entry.receipt)).then(
      (results) => batch.forEach((entry, i) => entry.settle(undefined, results[i])),
      (err: unknown) => batch.forEach((entry) => entry.settle(err)),
    );
    this.inFlight.add(sent);
    void sent.finally(() => this.inFlight.delete(sent));
  }

  async drain(): Promise<void> {
    this.flush();
    await Promise.all(this.inFlight);
  }
}

export function startConsumer(
  transport: ConsumerTransport,
  topic: string,
  handler: MessageHandler,
  options: ClientConsumeOptions,
  concurrency: number,
): Consumer {
  const waitMs = options.waitMs ?? 20_000;
  const report =
    options.onError ??
    ((err: unknown) => process.emitWarning(err instanceof Error ? err : new Error(String(err))));
  const acks = new AckBatcher((receipts) => transport.ackMany(receipts));
  const stop = new AbortController();
  let active = 0;
  let slotFreed: (() => void) | undefined;
  const freeSlot = () => {
    active--;
    slotFreed?.();
  };

  const run = async (message: ReceivedMessage) => {
    try {
      try {
        await handler(message);
      } catch (err) {
        report(err, message);
        await transport.nack(message.receipt);
        return;
      }
      await acks.ack(message.receipt);
    } catch (err) {
      // The ack or nack did not reach the server: the message comes back after its
      // visibility timeout.
      report(err, message);
    } finally {
      freeSlot();
    }
  };

  const loop = (async () => {
    let failures = 0;
    while (!stop.signal.aborted) {
      if (active >= concurrency) {
        await new Promise<void>((resolve) => (slotFreed = resolve));
        slotFreed = undefined;
        continue;
      }
      let batch: ReceivedMessage[];
      try {
        batch = await transport.receive(
          topic,
          {
            max: concurrency - active,
            waitMs,
            ...(options.visibilityMs === undefined ? {} : { visibilityMs: options.visibilityMs }),
          },
          stop.signal,
        );
        failures = 0;
      } catch (err) {
        if (stop.signal.aborted) break;
        report(err);
        const backoff = Math.min(100 * 2 ** failures++, 5000);
        await sleep(backoff, undefined, { signal: stop.signal }).catch(() => undefined);
        continue;
      }
      for (const message of batch) {
        active++;
        void run(message);
      }
    }
  })();

  return {
    close: async () => {
      stop.abort();
      slotFreed?.();
      await loop;
      while (active > 0) await new Promise<void>((resolve) => (slotFreed = resolve));
      await acks.drain();
    },
  };
}
