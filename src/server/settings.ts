/** Server defaults and log levels, apart from server.ts so the CLI can show them without loading Fastify. */

export type LogLevel = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';

export const LOG_LEVELS: readonly LogLevel[] = [
  'fatal',
  'error',
  'warn',
  'info',
  'debug',
  'trace',
  'silent',
];

/** Largest request body, in bytes. */
export const DEFAULT_BODY_LIMIT = 1024 * 1024;
/** Longest long poll of a receive, in ms. */
export const DEFAULT_MAX_WAIT_MS = 20_000;
