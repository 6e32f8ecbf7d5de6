// Number, time and error text shared by the dashboard's cards.
import { Unauthorized, Unreachable } from './api.js';

export const number = (n: number | null | undefined) =>
  n === null || n === undefined ? '–' : n.toLocaleString('en-US');

export const rateText = (n: number | null | undefined) =>
  n === null || n === undefined
    ? '–'
    : `${n < 10 ? n.toFixed(1) : Math.round(n).toLocaleString('en-US')}/s`;

export const when = (epochMs: number) =>
  new Date(epochMs).toISOString().replace('T', ' ').replace('Z', ' UTC');

/**
 * "2026-12-01 02:30:00 Europe/Berlin": a time as the wall clock of `timeZone` reads it, the way
 * a cron expression in that zone is written. In UTC when this browser does not know the zone.
 */
export function inZone(epochMs: number, timeZone: string): string {
  let parts: Intl.DateTimeFormatPart[];
  try {
    parts = new Intl.DateTimeFormat('en-US', {
      timeZone,
      year: 'numeric',
      month: '2-digit',
      day: '2-digit',
      hour: '2-digit',
      minute: '2-digit',
      second: '2-digit',
      hourCycle: 'h23',
    }).formatToParts(new Date(epochMs));
  } catch {
    return when(epochMs);
  }
  const part = (type: Intl.DateTimeFormatPartTypes) =>
    parts.find((p) => p.type === type)?.value ?? '';
  return `${part('year')}-${part('month')}-${part('day')} ${part('hour')}:${part('minute')}:${part('second')} ${timeZone}`;
}

/** "in 4 min", "2 h ago": a time from now, in its largest whole unit (rounded down). */
export function relative(deltaMs: number): string {
  const size = Math.abs(deltaMs);
  if (size < 1_000) return 'now';
  let text: string;
  if (size < 60_000) text = `${Math.floor(size / 1_000)} s`;
  else if (size < 3_600_000) text = `${Math.floor(size / 60_000)} min`;
  else if (size < 2 * 86_400_000) text = `${Math.floor(size / 3_600_000)} h`;
  else text = `${number(Math.floor(size / 86_400_000))} d`;
  return deltaMs > 0 ? `in ${text}` : `${text} ago`;
}

const UNITS: Array<[ms: number, unit: string]> = [
  [86_400_000, 'd'],
  [3_600_000, 'h'],
  [60_000, 'min'],
  [1_000, 's'],
];

/** "90 s", "1 d", "1,500 ms": a duration exactly, in the largest unit that divides it. */
export function duration(ms: number): string {
  for (const [size, unit] of UNITS) if (ms % size === 0) return `${number(ms / size)} ${unit}`;
  return `${number(ms)} ms`;
}

const pad = (n: number) => String(n).padStart(2, '0');

/** Local time of day: HH:MM:SS, or HH:MM when `seconds` is false. */
export function clock(epochMs: number, seconds = true): string {
  const date = new Date(epochMs);
  const minutes = `${pad(date.getHours())}:${pad(date.getMinutes())}`;
  return seconds ? `${minutes}:${pad(date.getSeconds())}` : minutes;
}

/**
 * One sentence for a failed call. The server's own message when it answered; the page's words
 * when it did not, since a browser's "Failed to fetch" tells a user nothing.
 */
export function errorText(err: unknown): string {
  if (err instanceof Unauthorized) {
    return err.tokenSent ? 'the token was not accepted' : 'this server needs a token';
  }
  if (err instanceof Unreachable) return `${err.message}; try again when it is back`;
  if (err instanceof Error) return err.message;
  return String(err);
}

/**
 * errorText for a call a card made, after handing a refused token to `onUnauthorized`, so that
 * the page asks for another one.
 */
export function failureText(err: unknown, onUnauthorized: (err: Unauthorized) => void): string {
  if (err instanceof Unauthorized) onUnauthorized(err);
  return errorText(err);
}
