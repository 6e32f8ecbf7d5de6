/** Server defaults and log levels, apart from server.ts so the CLI can show them without loading Fastify. */

const LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof LEVELS)[number];
export const LOG_LEVELS: readonly LogLevel[] = LEVELS;

/**
 * Largest request body, in bytes: a payload of the queue's default maxPayloadBytes (1 MiB) and
 * room for the fields around it, so that a payload over it is told as such (413
 * ERR_TICKWHEEL_PAYLOAD_TOO_LARGE), not as a body over the limit.
 */
export const DEFAULT_BODY_LIMIT = 1024 * 1024 + 64 * 1024;
/** Longest long poll of a receive, in ms. */
export const DEFAULT_MAX_WAIT_MS = 20_000;
/** Topics with a `topic` label of their own in /metrics; the rest are summed as "_other". */
export const DEFAULT_METRICS_TOPICS = 100;
/** Time to receive a whole request, headers included, in ms. */
export const DEFAULT_REQUEST_TIMEOUT_MS = 30_000;
/** Seconds a client is told to wait (Retry-After) while the queue recovers. */
export const RETRY_AFTER_SECONDS = '1';
