// Rescheduling from the page: which statuses allow it, and the delays the queue takes.

/** Statuses a reschedule applies to; an in-flight message must be acked or nacked first. */
export const CAN_RESCHEDULE = new Set(['scheduled', 'ready']);

/** Longest reschedule delay the page offers: the queue refuses more than 100 years ahead. */
const MAX_DELAY_SECONDS = 100 * 365 * 86_400;

/** A delay typed in seconds from now: in seconds and milliseconds, or what is wrong with it. */
export type Delay = { seconds: number; ms: number } | { problem: string };

export function readDelay(text: string): Delay {
  const trimmed = text.trim();
  const seconds = Number(trimmed);
  if (trimmed === '' || !Number.isFinite(seconds) || seconds < 0) {
    return { problem: 'The delay is a number of seconds from now: 0 or more.' };
  }
  if (seconds > MAX_DELAY_SECONDS) return { problem: 'The delay can be at most 100 years.' };
  return { seconds, ms: Math.round(seconds * 1000) };
}
