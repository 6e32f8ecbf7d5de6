/**
 * The queue's options and the arguments of its operations, checked. Bounds the HTTP API shares
 * come from src/protocol/limits.ts, so the two cannot differ.
 */

import { checkAlarmClock, SystemClock, type Clock } from '../clock/index.js';
import {
  checkFlag,
  checkKnownOptions,
  checkOption,
  checkOptionsObject,
  checkSignal,
  describe,
  invalidOption,
  onlyKnownOptions,
  optionNames,
} from '../validate.js';
import {
  MAX_NACK_DELAY_MS,
  MAX_RECEIVE,
  MAX_VISIBILITY_MS,
  MAX_WAIT_MS,
} from '../protocol/limits.js';
import { checkFaultHandler, type FaultReporter } from './faults.js';
import { clipReason, invalidMessage } from './message.js';
import { checkPushOptions, type PushOptions } from './push-guard.js';
import type {
  AckOptions,
  DelayQueueOptions,
  NackOptions,
  QueueOptions,
  ReceiveOptions,
} from './types.js';

/** How long a delivery stays in flight unacked when the queue is not told otherwise. */
export const DEFAULT_VISIBILITY_MS = 30_000;
/** Default `maxBytes` of the embedded receive(): twice the HTTP default (no network here). */
export const EMBEDDED_RECEIVE_BYTES = 16 * 1024 * 1024;

/** Largest `maxPayloadBytes`: with its record's other fields, within a 16 MiB log record. */
const MAX_PAYLOAD_BYTES = 16 * 1024 * 1024 - 1024;

/** Payload bytes the embedded queue holds in memory by default: a 512 MB container's share. */
export const DEFAULT_PAYLOAD_MEMORY_BYTES = 128 * 1024 * 1024;

/**
 * Recurring schedules a queue keeps by default. Each costs a timer and its record in memory on
 * the node that runs them (the embedded queue, or partition 0's owner), and its record in the
 * store; the leader of a partitioned queue reads every record again at each change.
 */
export const DEFAULT_MAX_SCHEDULES = 100_000;

/** The options every backend takes, checked, with their defaults filled in. */
export interface QueueLimits {
  horizonMs: number;
  maxPayloadBytes: number;
  visibilityMs: number;
  maxWaitMs: number;
  push: PushOptions;
  /** Where background faults go: the `onFault` option made safe, or process warnings. */
  onFault: FaultReporter;
  /** Whether acks and nacks wait for durability unless a call says otherwise. */
  durableAcks: boolean;
  /** Recurring schedules kept at most: a put of one more name is refused. */
  maxSchedules: number;
}

export interface QueueSettings extends QueueLimits {
  clock: Clock;
  rememberFinished: number;
  payloadMemoryBytes: number;
}

export function checkQueueOptions(options: QueueOptions): QueueLimits {
  return {
    horizonMs: checkOption(options.horizonMs ?? 60_000, 'horizonMs', 10, 86_400_000),
    maxPayloadBytes: checkOption(
      options.maxPayloadBytes ?? 1024 * 1024,
      'maxPayloadBytes',
      0,
      MAX_PAYLOAD_BYTES,
      true,
    ),
    visibilityMs: checkVisibility(options.visibilityMs ?? DEFAULT_VISIBILITY_MS),
    maxWaitMs: checkOption(options.maxWaitMs ?? 60_000, 'maxWaitMs', 0, MAX_WAIT_MS),
    push: checkPushOptions(options.push),
    onFault: checkFaultHandler(options.onFault),
    durableAcks: checkFlag(options.durableAcks ?? false, 'durableAcks'),
    maxSchedules: checkOption(
      options.maxSchedules ?? DEFAULT_MAX_SCHEDULES,
      'maxSchedules',
      0,
      10_000_000,
      true,
    ),
  };
}

export function checkEmbeddedOptions(options: DelayQueueOptions): QueueSettings {
  const clock = options.clock ?? new SystemClock({ epoch: true });
  checkAlarmClock(clock);
  return {
    ...checkQueueOptions(options),
    clock,
    rememberFinished: checkOption(
      options.rememberFinished ?? 10_000,
      'rememberFinished',
      0,
      10_000_000,
      true,
    ),
    payloadMemoryBytes: checkOption(
      options.payloadMemoryBytes ?? DEFAULT_PAYLOAD_MEMORY_BYTES,
      'payloadMemoryBytes',
      0,
      Infinity,
    ),
  };
}

const RECEIVE_OPTIONS = optionNames<ReceiveOptions>({
  max: true,
  waitMs: true,
  visibilityMs: true,
  maxBytes: true,
});

export function checkReceiveOptions(
  options: ReceiveOptions,
  defaults: { maxWaitMs: number; visibilityMs: number },
): Required<ReceiveOptions> {
  checkOptionsObject(options, 'receive options', '{ max: 10, waitMs: 5_000 }');
  checkKnownOptions(options, RECEIVE_OPTIONS, 'receive()');
  return {
    max: checkOption(options.max ?? 1, 'max', 1, MAX_RECEIVE, true),
    waitMs: checkOption(options.waitMs ?? 0, 'waitMs', 0, defaults.maxWaitMs),
    visibilityMs: checkVisibility(options.visibilityMs ?? defaults.visibilityMs),
    maxBytes: checkOption(
      options.maxBytes ?? EMBEDDED_RECEIVE_BYTES,
      'maxBytes',
      1,
      Number.MAX_SAFE_INTEGER,
      true,
    ),
  };
}

const RECEIVE_CALL_OPTIONS = optionNames<{ signal?: AbortSignal }>({ signal: true });

/** receive()'s third argument, `{ signal }`: the signal, if any. */
export function checkReceiveCall(call: { signal?: AbortSignal }): AbortSignal | undefined {
  checkOptionsObject(call, 'receive call options', '{ signal: controller.signal }');
  checkKnownOptions(call, RECEIVE_CALL_OPTIONS, 'receive()');
  return checkSignal(call.signal);
}

export function checkVisibility(visibilityMs: unknown): number {
  return checkOption(visibilityMs, 'visibilityMs', 1, MAX_VISIBILITY_MS);
}

const ACK_OPTIONS = optionNames<AckOptions>({ durable: true });
const NACK_OPTIONS = optionNames<NackOptions>({ delayMs: true, reason: true, durable: true });

/** Checks ack() options; resolves whether the ack waits for durability (`durableAcks` unless given). */
export function checkAck(options: AckOptions, durableAcks: boolean, method = 'ack'): boolean {
  // Once per ack: the messages of the checks are made only for options that fail them.
  if (typeof options !== 'object' || options === null || !onlyKnownOptions(options, ACK_OPTIONS)) {
    checkOptionsObject(options, `${method} options`, '{ durable: true }');
    checkKnownOptions(options, ACK_OPTIONS, `${method}()`);
  }
  return options.durable === undefined ? durableAcks : checkFlag(options.durable, 'durable');
}

/** Checks nack() options; resolves the reason to keep as lastError (undefined: none given). */
export function checkNack(options: NackOptions, method = 'nack'): string | undefined {
  checkOptionsObject(options, `${method} options`, '{ delayMs: 5000 }');
  checkKnownOptions(options, NACK_OPTIONS, `${method}()`);
  if (options.delayMs !== undefined) checkOption(options.delayMs, 'delayMs', 0, MAX_NACK_DELAY_MS);
  checkFlag(options.durable, 'durable');
  const reason: unknown = options.reason;
  if (reason === undefined) return undefined;
  if (typeof reason !== 'string') {
    throw invalidOption(`reason must be a string, got ${describe(reason)}`);
  }
  return clipReason(reason);
}

/** Checks the receipt of ack() / nack(): the string receive() gave (the backends take it as one). */
export function checkReceipt(receipt: unknown, what = 'receipt'): void {
  if (typeof receipt !== 'string') {
    throw invalidMessage(`${what} must be the string receive() returned, got ${describe(receipt)}`);
  }
}

export function checkReceipts(receipts: readonly string[], method: string): void {
  if (!Array.isArray(receipts)) {
    throw invalidMessage(`${method} takes an array of receipts, got ${describe(receipts)}`);
  }
  for (let i = 0; i < receipts.length; i++) checkReceipt(receipts[i], `receipts[${i}]`);
}
