/**
 * consume() over HTTP: the embedded consume()'s Worker (src/queue/worker.ts) over the client's
 * receive, ack and nack, so that handler errors, back-off, concurrency and close() behave the
 * same. HTTP's own: `waitMs` (each receive's long poll), and acks made within ACK_WINDOW_MS of
 * each other go to the server in one request (AckBatcher).
 */

import { setTimeout as realSetTimeout } from 'node:timers';

import type { ConsumeErrorContext, ConsumeOptions, Consumer } from '../queue/types.js';
import type { WorkerSource } from '../queue/worker.js';

/** What an error reported to `onError` was about: the same as the embedded consume()'s. */
export type { ConsumeErrorContext, Consumer };

/** The embedded consume()'s options (same names, meanings, defaults), plus `waitMs`. */
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
   * its visibility timeout) and of receiving (retried with backoff). Default: a process warning
   * naming the topic, the message id and the attempt.
   */
  onError?: (err: unknown, context: ConsumeErrorContext) => void;
}

/** What the consumer needs from the client: a Worker's source, with acks sent many at once. */
export interface ConsumerTransport extends Pick<WorkerSource, 'receive' | 'nack'> {
  ackMany(receipts: string[]): Promise<boolean[]>;
}

/** Acks in one request at most (the server's MAX_BATCH is larger). */
const MAX_ACK_BATCH = 1000;
/**
 * How long an ack waits for others to share its request. A receive answers as soon as a message
 * is ready, so under a steady trickle each batch holds one or two messages: an ack request per
 * turn was as many requests as receives, each costing the client and the server more CPU than
 * the message. The handler's slot is free before its ack is sent, so this delays no delivery;
 * an ack later by this much only matters if the visibility timeout runs out meanwhile.
 */
const ACK_WINDOW_MS = 10;

/**
 * Collects acks made within ACK_WINDOW_MS into one request. Every ack of a batch gets the
 * batch's promise: one promise per request, not per ack.
 */
class AckBatcher {
  private open: { receipts: string[]; send: () => void; sent: Promise<boolean[]> } | undefined;

  constructor(private readonly ackMany: (receipts: string[]) => Promise<boolean[]>) {}

  ack(receipt: string): Promise<boolean[]> {
    const batch = (this.open ??= this.start());
    batch.receipts.push(receipt);
    if (batch.receipts.length >= MAX_ACK_BATCH) batch.send();
    return batch.sent;
  }

  /** A batch, sent ACK_WINDOW_MS after its first ack or once full, whichever comes first. */
  private start(): { receipts: string[]; send: () => void; sent: Promise<boolean[]> } {
    const receipts: string[] = [];
    let go!: () => void;
    const full = new Promise<void>((resolve) => (go = resolve));
    const batch = {
      receipts,
      // Closed to further acks at once, sent once the promise chain runs.
      send: () => {
        if (this.open === batch) this.open = undefined;
        go();
      },
      sent: full.then(() => this.ackMany(receipts)),
    };
    // Node's own timer: fake timers installed by a test must not hold acks back.
    realSetTimeout(batch.send, ACK_WINDOW_MS);
    return batch;
  }
}

/** The client's receive, ack and nack as a Worker's source. */
export function consumerSource(transport: ConsumerTransport): WorkerSource {
  const acks = new AckBatcher((receipts) => transport.ackMany(receipts));
  return {
    receive: (topic, options, signal) => transport.receive(topic, options, signal),
    ack: (receipt) => acks.ack(receipt),
    nack: (receipt, reason) => transport.nack(receipt, reason),
  };
}
