/**
 * Hand-outs: a delivery counts against a message's attempts from the moment the message is
 * handed to a consumer, even if the process never gets to ack, nack or time it out.
 *
 * Each hand-out appends a HANDOUT record (records.ts: the MOVE layout, due time unchanged,
 * attempts including this delivery), which becomes the message's latest record, as a MOVE
 * would. The record is only staged in the log: nothing waits for it, and it is made durable
 * by the next group commit (fsync 'batch'), the one that makes the next schedule or ack
 * durable, so a delivery costs no fsync of its own. A crash within that commit window (a few
 * ms) may lose the count of the deliveries it handed out: those messages come back with one
 * attempt fewer.
 *
 * At recovery a message whose latest record is a HANDOUT was handed out and never acked,
 * nacked or timed out after it: the process stopped during that delivery. With its attempts
 * used up it is buried (a dead letter) with a reason saying so, so a message that crashes its
 * consumer cannot come back forever; otherwise it is handed to the queue, due at once, with
 * that reason as its lastError.
 */

import type { MessageState } from '../../queue/message.js';

/** Why a delivery ended without an ack, nack or timeout: the process stopped under it. */
export function stoppedReason(message: MessageState): string {
  return (
    `the process stopped (exit, crash or restart) during delivery ${message.attempts} of ` +
    `${message.maxAttempts}, before an ack or nack`
  );
}

/**
 * A message found at recovery with a delivery that never ended: its lastError says so, and it
 * is buried (the promise of its BURY) if that delivery was its last allowed one, else left to
 * be handed to the queue (undefined).
 */
export function endStoppedDelivery(
  message: MessageState,
  bury: (message: MessageState) => Promise<void>,
): Promise<void> | undefined {
  message.lastError = stoppedReason(message);
  return message.attempts >= message.maxAttempts ? bury(message) : undefined;
}
