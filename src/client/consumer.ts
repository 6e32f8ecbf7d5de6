/**
 * consume() over HTTP: long-poll for messages, run the handler on up to `concurrency` at once,
 * ack when it resolves, nack when it throws. Acks of handlers that finish together go to the
 * server in one request (AckBatcher). Receive errors (server restarting, network trouble) are
 * reported and retried with backoff; the consumer only stops on close().
 */

import { setTimeout as sleep } from 'node:timers/promises';
import { checkCallback, checkOption, describe, TickwheelTypeError } from '../errors.js';
import type {
  ConsumeErrorContext,
  ConsumeOptions,
  MessageHandler,
  ReceivedMessage,
} from '../queue/delay-queue.js';
import { reasonOf } from '../queue/message.js';
import { MAX_VISIBILITY_MS, MAX_WAIT_MS } from '../protocol/limits.js';

/** What an error reported to `onError` was about: the same as the embedded consume()'s. */
export type { ConsumeErrorContext };

/**
 * The embedded consume()'s options, with the same names, meanings and defaults, plus `waitMs`,
 * which only the HTTP consumer has.
 */
export interface ClientConsumeOptions extends ConsumeOptions {
  /** Handlers running at once. Default 1, at most 1000. */
  concurrency?: number;
  /** Visibility timeout of each delivery, 1 ms to 12 h. Default: the server queue's. */
  visibilityMs?: number;
  /**
   * HTTP only: long-poll wait of each receive, 1 ms to 1 h (the server caps it at its
   * --max-wait). Default 20,000 ms.
   */
  waitMs?: number;
  /**
   * Errors of the handler (the message is then nacked), of its ack or nack (it comes back after
   * its visibility timeout) and of receiving (retried with backoff). Default: a process warning.
   */
  onError?: (err: unknown, context: ConsumeErrorContext) => void;
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
  nack(receipt: string, reason: string): Promise<boolean>;
}

interface CheckedConsumeOptions {
  concurrency: number;
  visibilityMs: number | undefined;
  waitMs: number;
  onError: ClientConsumeOptions['onError'];
}

/**
 * Checks consume() options at the call, so that a bad one (`visibilityMs: 0`) is a named error
 * at once rather than a consumer whose every receive the server refuses.
 */
export function checkConsumeOptions(options: unknown): CheckedConsumeOptions {
  if (options === undefined) options = {};
  if (typeof options !== 'object' || options === null) {
    throw new TickwheelTypeError(
      'ERR_TICKWHEEL_INVALID_OPTION',
      `consume options must be an object such as { concurrency: 8 }, got ${describe(options)}`,
    );
  }
  const given = options as ClientConsumeOptions;
  if (given.onError !== undefined) checkCallback(given.onError, 'onError');
  return {
    concurrency: checkOption(given.concurrency ?? 1, 'concurrency', 1, 1000, true),
    visibilityMs:
      given.visibilityMs === undefined
        ? undefined
        : checkOption(given.visibilityMs, 'visibilityMs', 1, MAX_VISIBILITY_MS),
    waitMs: checkOption(given.waitMs ?? 20_000, 'waitMs', 1, MAX_WAIT_MS),
    onError: given.onError,
  };
}

function warn(err: unknown): void {
  process.emitWarning(err instanceof Error ? err : new Error(String(err)));
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
  options: CheckedConsumeOptions,
): Consumer {
  const { concurrency, visibilityMs, waitMs, onError } = options;
  // An onError that throws must not end the consumer: its error becomes a warning.
  const report = (err: unknown, context: ConsumeErrorContext) => {
    if (onError === undefined) return warn(err);
    try {
      onError(err, context);
    } catch (thrown) {
      warn(thrown);
    }
  };
  const acks = new AckBatcher((receipts) => transport.ackMany(receipts));
  const stop = new AbortController();
  let active = 0;
  let slotFreed: (() => void) | undefined;
  const freeSlot = () => {
    active--;
    slotFreed?.();
  };

  const run = async (message: ReceivedMessage) => {
    const context = { topic, id: message.id, attempts: message.attempts };
    try {
      try {
        await handler(message);
      } catch (err) {
        report(err, context);
        // The reason is kept as the message's lastError, with its dead letter too.
        await transport.nack(message.receipt, reasonOf(err));
        return;
      }
      await acks.ack(message.receipt);
    } catch (err) {
      // The ack or nack did not reach the server: the message comes back after its
      // visibility timeout.
      report(err, context);
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
            ...(visibilityMs === undefined ? {} : { visibilityMs }),
          },
          stop.signal,
        );
        failures = 0;
      } catch (err) {
        if (stop.signal.aborted) break;
        report(err, { topic });
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
