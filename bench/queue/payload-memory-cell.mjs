/**
 * The cell side of the payload-memory workload (tickwheel only): large payloads due now with
 * no consumer, the process's memory against the backlog they make.
 *
 * - payloadFill: schedules messages of `payloadBytes` until the backlog reaches each size of
 *   `backlogs`, and once every write of a size is acknowledged and garbage is collected, sends
 *   a { type: 'sample' }. Then { type: 'filled' }, and it waits to be SIGKILLed.
 * - payloadRecover: opens the directory the killed process left (timed), samples memory, then
 *   drains the backlog (receive + ack, every payload checked) and samples again.
 *
 * RSS is what a container's memory limit sees, so each sample has it next to the heap, and the
 * peak RSS of the phase it closes (VmHWM, reset at the start of each phase where Linux allows).
 */

import { readFileSync, writeFileSync } from 'node:fs';
import { collectGarbage } from './stats.mjs';

export const PAYLOAD_TOPIC = 'payload-memory';

/** The peak RSS of this process since the last resetPeakRss() (Linux), else null. */
function peakRss() {
  try {
    const match = /VmHWM:\s+(\d+) kB/.exec(readFileSync('/proc/self/status', 'utf8'));
    return match === null ? null : Number(match[1]) * 1024;
  } catch {
    return null;
  }
}

/** Starts a new peak RSS window: "5" to clear_refs sets VmHWM to the current RSS (Linux). */
function resetPeakRss() {
  try {
    writeFileSync('/proc/self/clear_refs', '5');
  } catch {
    // Not Linux, or not allowed: the peak then covers the process's whole life.
  }
}

/** Memory after a full GC, the phase's peak RSS, and what the queue says it holds. */
async function sample(queue, fields) {
  // Let finished writes release their buffers, then collect.
  await new Promise((resolve) => setTimeout(resolve, 50));
  collectGarbage();
  const usage = process.memoryUsage();
  const stats = await queue.stats();
  return {
    ...fields,
    rss: usage.rss,
    peakRss: peakRss(),
    heapUsed: usage.heapUsed,
    heapTotal: usage.heapTotal,
    arrayBuffers: usage.arrayBuffers,
    external: usage.external,
    // Builds without a payload budget have no payloadMemory in their stats.
    heldPayloadBytes: stats.payloadMemory?.heldBytes ?? null,
    payloadLimitBytes: stats.payloadMemory?.limitBytes ?? null,
    inMemory: stats.inMemory,
    logBytes: stats.store?.logBytes ?? null,
  };
}

/**
 * Payload i of `bytes`: a Uint8Array with i in its first 4 bytes and i % 251 in every other
 * byte, or (json) { i, text } with `bytes` characters of text, to check it whole when received.
 */
function payloadOf(kind, i, bytes) {
  if (kind === 'json') return { i, text: String.fromCharCode(97 + (i % 26)).repeat(bytes) };
  const payload = new Uint8Array(bytes).fill(i % 251);
  new DataView(payload.buffer).setUint32(0, i);
  return payload;
}

function intact(kind, payload, bytes) {
  if (kind === 'json') {
    const { i, text } = payload ?? {};
    const letter = String.fromCharCode(97 + (i % 26));
    return typeof text === 'string' && text.length === bytes && text.at(-1) === letter;
  }
  if (!(payload instanceof Uint8Array) || payload.byteLength !== bytes) return false;
  const i = new DataView(payload.buffer, payload.byteOffset, 4).getUint32(0);
  return payload[4] === i % 251 && payload[bytes - 1] === i % 251;
}

/**
 * Schedules payloads first .. first + count - 1, due now: ready at once, and no consumer takes
 * them. A function of its own, so that no variable of the fill's loop still holds the last
 * batch's payloads when memory is sampled (a suspended async function can keep them).
 */
async function scheduleBatch(queue, kind, first, count, payloadBytes) {
  const requests = new Array(count);
  for (let k = 0; k < count; k++) {
    requests[k] = { topic: PAYLOAD_TOPIC, payload: payloadOf(kind, first + k, payloadBytes) };
  }
  await queue.scheduleMany(requests);
}

export async function payloadFill(peer, options, progress, send) {
  const { backlogs, payloadBytes, payloadKind, batch } = options;
  const queue = peer.queue;
  const baseline = await sample(queue, { backlogBytes: 0, messages: 0 });
  send({ type: 'sample', sample: baseline });
  let messages = 0;
  const started = performance.now();
  for (const backlog of backlogs) {
    resetPeakRss();
    while (messages * payloadBytes < backlog) {
      const count = Math.min(batch, Math.ceil(backlog / payloadBytes) - messages);
      await scheduleBatch(queue, payloadKind, messages, count, payloadBytes);
      messages += count;
    }
    const taken = await sample(queue, {
      backlogBytes: messages * payloadBytes,
      messages,
      fillMs: Math.round(performance.now() - started),
    });
    progress(
      `${messages.toLocaleString('en-US')} messages (${Math.round(taken.backlogBytes / 2 ** 20)} MiB): RSS ${Math.round(taken.rss / 2 ** 20)} MiB`,
    );
    send({ type: 'sample', sample: taken });
  }
  send({ type: 'filled', messages });
  // The runner SIGKILLs this process: what a restart then meets is a crash, not a close.
  await new Promise(() => {});
}

export async function payloadRecover(peer, options) {
  const { payloadBytes, payloadKind, messages } = options;
  const queue = peer.queue;
  const recovered = await sample(queue, {
    openMs: Math.round(peer.openMs),
    recoveryDurationMs: queue.recovery?.durationMs ?? null,
    live: queue.recovery?.live ?? null,
  });
  resetPeakRss();
  const started = performance.now();
  let received = 0;
  let good = 0;
  while (received < messages) {
    const batch = await queue.receive(PAYLOAD_TOPIC, { max: 16, waitMs: 1000 });
    if (batch.length === 0) break;
    received += batch.length;
    for (const message of batch) if (intact(payloadKind, message.payload, payloadBytes)) good++;
    await queue.ackMany(batch.map((message) => message.receipt));
  }
  const drained = await sample(queue, {
    drainMs: Math.round(performance.now() - started),
    received,
    intact: good,
  });
  return { recovered, drained };
}
