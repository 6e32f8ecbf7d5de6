/** A delivery as the HTTP API answers it: a binary payload in base64, marked as such. */

import type { ReceivedMessage } from '../../delay-queue.js';
import type { WireReceivedMessage } from '../../protocol/wire.js';

export function toWire(message: ReceivedMessage): WireReceivedMessage {
  const { payload } = message;
  if (!(payload instanceof Uint8Array)) return message;
  const bytes = Buffer.from(payload.buffer, payload.byteOffset, payload.byteLength);
  return { ...message, payload: bytes.toString('base64'), payloadEncoding: 'base64' };
}
