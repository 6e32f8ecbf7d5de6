/**
 * The server's JSON log lines as short lines for a person at a terminal (`--log-format pretty`):
 * `14:56:14.220 INFO  GET /v1/stats 200 1.4ms`. Not pino-pretty: the CLI needs no package.
 */

import { parsePayload } from './parse.js';

const LEVELS: Record<number, string> = {
  10: 'TRACE',
  20: 'DEBUG',
  30: 'INFO',
  40: 'WARN',
  50: 'ERROR',
  60: 'FATAL',
};

/** Fields every line has, or that the line's head shows already. */
const SHOWN = new Set(['level', 'time', 'pid', 'hostname', 'msg', 'reqId', 'code', 'err']);

/** Longest value of a field as shown: a big object is cut. */
const MAX_VALUE_CHARS = 200;

/** One JSON log line (with or without its newline) as a line for people, newline included. */
export function prettyLine(line: string): string {
  const record = parsePayload(line);
  if (typeof record !== 'object' || record === null || Array.isArray(record)) {
    return line.endsWith('\n') ? line : `${line}\n`;
  }
  const fields = record as Record<string, unknown>;
  const parts = [clock(fields.time), (LEVELS[fields.level as number] ?? 'LOG').padEnd(5)];
  const request = requestText(fields);
  parts.push(request ?? String(fields.msg ?? ''));
  if (typeof fields.code === 'string') parts.push(`[${fields.code}]`);
  for (const [key, value] of Object.entries(fields)) {
    if (SHOWN.has(key) || (request !== undefined && REQUEST_FIELDS.has(key))) continue;
    parts.push(`${key}=${valueText(value)}`);
  }
  const err = fields.err as { message?: unknown } | undefined;
  if (typeof err?.message === 'string') parts.push(`error: ${err.message}`);
  return `${parts.join(' ')}\n`;
}

const REQUEST_FIELDS = new Set(['req', 'res', 'responseTime']);

/** `GET /v1/stats 200 1.4ms` for a request line; undefined for any other. */
function requestText(fields: Record<string, unknown>): string | undefined {
  const req = fields.req as { method?: unknown; url?: unknown } | undefined;
  const res = fields.res as { statusCode?: unknown } | undefined;
  if (typeof req?.method !== 'string' || typeof req.url !== 'string') return undefined;
  const status = res?.statusCode === undefined ? '' : ` ${String(res.statusCode)}`;
  const took = typeof fields.responseTime === 'number' ? ` ${fields.responseTime}ms` : '';
  return `${req.method} ${req.url}${status}${took}`;
}

function clock(time: unknown): string {
  if (typeof time !== 'number') return '--:--:--.---';
  const at = new Date(time);
  const two = (n: number) => String(n).padStart(2, '0');
  return `${two(at.getHours())}:${two(at.getMinutes())}:${two(at.getSeconds())}.${String(at.getMilliseconds()).padStart(3, '0')}`;
}

function valueText(value: unknown): string {
  const text = typeof value === 'string' && !/\s/.test(value) ? value : JSON.stringify(value);
  return text.length <= MAX_VALUE_CHARS ? text : `${text.slice(0, MAX_VALUE_CHARS - 1)}…`;
}
