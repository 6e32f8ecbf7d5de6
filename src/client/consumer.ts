/**
 * consume() over HTTP: the embedded consume()'s Worker over the client's delivery stream, so that
 * errors, back-off, concurrency and close() behave the same; acks are batched (AckBatcher).
 */

import { setTimeout as realSetTimeout } from 'node:timers';

import type { ConsumeOptions } from '../queue/types.js';
import type { WorkerSettings, WorkerSource } from '../queue/worker.js';
import { MAX_RECEIVE } from '../protocol/limits.js';
import { DeliveryStream, type StreamSettings } from './delivery-stream.js';

/** The embedded consume()'s options (same names, meanings, defaults), plus `waitMs`. */
export interface ClientConsumeOptions extends ConsumeOptions {
  /**
   * How long the consumer waits for a delivery before it looks again (its stop, a broken
   * stream), 1 ms to 1 h. Default 20,000 ms.
   */
  waitMs?: number;
}

/** What the consumer needs from the client: its stream, and acks sent many at once. */
export interface ConsumerTransport extends Pick<WorkerSource, 'nack'> {
  openStream: StreamSettings['open'];
  ackMany(receipts: string[]): Promise<boolean[]>;
}

/** Acks in one request at most (the server's MAX_BATCH is larger). */
const MAX_ACK_BATCH = 1000;
/**
 * How long an ack waits for others to share its request (a request per ack costs more CPU than
 * a trickle of messages); the handler's slot is free before its ack is sent: no delivery waits.
 */
const ACK_WINDOW_MS = 10;

/** Collects acks made within ACK_WINDOW_MS into one request; its acks share its promise. */
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

export function consumerSource(
  transport: ConsumerTransport,
  topic: string,
  settings: WorkerSettings,
): WorkerSource {
  const acks = new AckBatcher((receipts) => transport.ackMany(receipts));
  const stream = new DeliveryStream({
    topic,
    window: Math.min(settings.concurrency + settings.prefetch, MAX_RECEIVE),
    visibilityMs: settings.visibilityMs,
    open: transport.openStream,
    nack: transport.nack,
  });
  return {
    receive: (_topic, { max, waitMs }, signal) => stream.receive(max, waitMs, signal),
    ack: (receipt) => acks.ack(receipt),
    nack: (receipt, reason) => transport.nack(receipt, reason),
  };
}
