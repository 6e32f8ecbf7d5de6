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
