/** Deliveries over HTTP: a binary payload in base64, marked as such; taken ones handed back. */

import type { ReceivedMessage } from '../../delay-queue.js';
import type { Queue } from '../../queue/api.js';
import type { WireReceivedMessage } from '../../protocol/wire.js';

export function toWire(message: ReceivedMessage): WireReceivedMessage {
  const { payload } = message;
  if (!(payload instanceof Uint8Array)) return message;
  const bytes = Buffer.from(payload.buffer, payload.byteOffset, payload.byteLength);
  return { ...message, payload: bytes.toString('base64'), payloadEncoding: 'base64' };
}

/** Gives back deliveries taken for a client gone: redelivered at once. */
export function handBack(queue: Queue, messages: readonly { receipt: string }[]): void {
  for (const message of messages) queue.nack(message.receipt, { delayMs: 0 }).catch(() => false);
}
