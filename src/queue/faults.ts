/**
 * Background faults: what goes wrong in a queue's own work, where no caller awaits a promise.
 * Every backend reports them as a QueueFault with a code to the `onFault` option, or else as a
 * process warning with the same code and text. A handler that throws never breaks the queue.
 */

import { emitCodedWarning, type TickwheelErrorCode } from '../errors.js';
import { checkCallback } from '../validate.js';
import { clipReason } from './message.js';

/**
 * Codes of faults that are not a thrown error's: the error's own code otherwise
 * (ERR_TICKWHEEL_IO, ERR_TICKWHEEL_LOCK_LOST, ERR_TICKWHEEL_PUSH_FAILED, ...).
 */
export const FAULT_ONLY_CODES = {
  TICKWHEEL_STORE_HEALED: 'a background write of the store works again after failing (level info)',
  TICKWHEEL_PUSH_HEALED: 'a push target answers again after failing (level info)',
  ERR_TICKWHEEL_HANDLER_FAILED:
    "a consumer's handler threw or rejected (consume()'s default onError)",
  ERR_TICKWHEEL_SLOW_CLOSE: 'close() of a consumer still waits for its handlers after 10 s',
  ERR_TICKWHEEL_LISTENER_FAILED: "a listener of queue events, or a consumer's onError, threw",
  ERR_TICKWHEEL_INTERNAL: 'anything else, without a code of its own: a bug, most likely',
} as const;

export type FaultOnlyCode = keyof typeof FAULT_ONLY_CODES;

export type FaultCode = TickwheelErrorCode | FaultOnlyCode;

export type FaultLevel = 'error' | 'warn' | 'info';

export type FaultField = string | number | boolean;

export interface QueueFault {
  /** What kind of fault, for alerts and searches: `ERR_TICKWHEEL_IO`, `TICKWHEEL_STORE_HEALED`, ... */
  code: FaultCode;
  /** `error` the queue stopped doing something; `warn` it is retrying; `info` it works again. */
  level: FaultLevel;
  /** One sentence for people: what failed, where, and what the queue does about it. */
  message: string;
  /** The name a process warning of it has (`TickwheelWarning`, or the error's class). */
  name: string;
  /** Facts a log pipeline can filter on: `topic`, `dir`, `part`, `errno`, `node`, ... */
  fields: Record<string, FaultField>;
  /** The error behind it, if any (its stack, for whoever debugs). */
  error?: Error;
}

export type FaultHandler = (fault: QueueFault) => void;

/** Longest message a fault carries: a runaway error text must not make a 1 MB log line. */
const MAX_MESSAGE_CHARS = 2000;

/** A fault from an error: its code, if it has a tickwheel one, else `code`. */
export function faultOf(
  err: unknown,
  options: {
    code?: FaultCode;
    level?: FaultLevel;
    message?: string;
    name?: string;
    fields?: Record<string, FaultField | undefined>;
  } = {},
): QueueFault {
  const error = err instanceof Error ? err : new Error(String(err));
  const own = (error as { code?: unknown }).code;
  const tickwheelCode =
    typeof own === 'string' && own.startsWith('ERR_TICKWHEEL') ? (own as FaultCode) : undefined;
  const fields: Record<string, FaultField> = {};
  for (const [key, value] of Object.entries(options.fields ?? {})) {
    if (value !== undefined) fields[key] = value;
  }
  // A system error's own code (ENOSPC, EMFILE) is what an operator searches for.
  if (typeof own === 'string' && tickwheelCode === undefined) fields.errno ??= own;
  return {
    code: tickwheelCode ?? options.code ?? 'ERR_TICKWHEEL_INTERNAL',
    level: options.level ?? 'warn',
    message: clipReason(options.message ?? error.message, MAX_MESSAGE_CHARS),
    name: options.name ?? error.name,
    fields,
    error,
  };
}

export function warnFault(fault: QueueFault): void {
  emitCodedWarning(fault.code, fault.message, fault.error, fault.name);
}

/** The reporter a queue's parts call: the handler given, made safe, or warnFault. */
export type FaultReporter = (fault: QueueFault) => void;

/** Checks the `onFault` option; the reporter the queue's parts use. */
export function checkFaultHandler(handler: unknown): FaultReporter {
  if (handler === undefined) return warnFault;
  checkCallback(handler, 'onFault');
  return (fault) => {
    try {
      (handler as FaultHandler)(fault);
    } catch (err) {
      warnFault(fault);
      warnFault(
        faultOf(err, {
          code: 'ERR_TICKWHEEL_LISTENER_FAILED',
          message: `onFault threw: ${err instanceof Error ? err.message : String(err)}`,
        }),
      );
    }
  };
}

/** Drops a fault whose code and text passed within `ms` (an outage fails every call); 100 kept. */
export function oncePer(ms: number, report: FaultReporter, now = Date.now): FaultReporter {
  const last = new Map<string, number>();
  return (fault) => {
    const key = `${fault.code} ${fault.message}`;
    const at = now();
    if (at - (last.get(key) ?? -Infinity) < ms) return;
    if (last.size >= 100) last.clear();
    last.set(key, at);
    report(fault);
  };
}
