/**
 * HTTP push delivery (docs/push.md): a Worker over the queue's own receive (so pushes obey
 * pause, rate limits, backoff and dead letters) sends a topic's messages to its target through a
 * PushSender; 2xx acks, anything else nacks. Failing pushes are one fault per topic, told again
 * only when the reason changes (TICKWHEEL_PUSH_HEALED once one succeeds).
 */

import { checkOption, describe, invalidOption } from '../validate.js';
import { faultOf, warnFault, type FaultReporter } from './faults.js';
import { fieldsOf, reasonOf } from './message.js';
import { DEFAULT_PUSH_CONNECTIONS, PushGuard, type PushOptions } from './push-guard.js';
import { PushAgents, PushError, PushSender } from './push-sender.js';

export { PushError } from './push-sender.js';
import type { TopicGate } from './topics.js';
import type { ReceivedMessage } from './types.js';
import type { WorkerSettings } from './worker.js';
import type { PushMethod, PushStats, PushTargetInput, PushTargetView } from '../protocol/model.js';

export type { PushMethod, PushStats, PushTargetView } from '../protocol/model.js';

/** Where a topic's messages are pushed, checked (bounds in checkPushTarget) and stored. */
export type PushTarget = Required<PushTargetInput>;

export const PUSH_METHODS: readonly PushMethod[] = ['POST', 'PUT', 'PATCH'];
export const DEFAULT_PUSH_TIMEOUT_MS = 10_000;
export const MAX_PUSH_TIMEOUT_MS = 600_000;
export const DEFAULT_PUSH_CONCURRENCY = 10;
export const MAX_PUSH_CONCURRENCY = 1000;
export const MAX_PUSH_HEADERS = 50;
export const MAX_PUSH_URL_LENGTH = 2048;

/** Headers tickwheel sets itself, or that HTTP reserves: a target cannot set these. */
const RESERVED_HEADERS = new Set([
  'host',
  'content-length',
  'content-type',
  'transfer-encoding',
  'connection',
  'keep-alive',
  'upgrade',
  'te',
  'trailer',
  'expect',
  'proxy-connection',
]);
const HEADER_NAME = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]{1,256}$/;
// What Node sends: visible ASCII, spaces, tabs and Latin-1; no line breaks or other controls.
const HEADER_VALUE = /^[\t\x20-\x7e\x80-\xff]{0,8192}$/;

const FIELDS = ['url', 'method', 'headers', 'timeoutMs', 'concurrency', 'secret'];

export function checkPushTarget(value: unknown): PushTarget | null {
  if (value === null) return null;
  const given = fieldsOf(
    value,
    FIELDS,
    'push',
    "{ url: 'https://example.com/hook', secret: '...' } or null (no push)",
  );
  return {
    url: checkUrl(given.url),
    method: checkMethod(given.method ?? 'POST'),
    headers: checkHeaders(given.headers ?? {}),
    timeoutMs: checkOption(
      given.timeoutMs ?? DEFAULT_PUSH_TIMEOUT_MS,
      'push.timeoutMs',
      1,
      MAX_PUSH_TIMEOUT_MS,
      true,
    ),
    concurrency: checkOption(
      given.concurrency ?? DEFAULT_PUSH_CONCURRENCY,
      'push.concurrency',
      1,
      MAX_PUSH_CONCURRENCY,
      true,
    ),
    secret: checkSecret(given.secret),
  };
}

function checkUrl(value: unknown): string {
  if (typeof value !== 'string' || value.length > MAX_PUSH_URL_LENGTH) {
    throw invalidOption(
      `push.url must be an http: or https: URL of at most ${MAX_PUSH_URL_LENGTH} characters, got ${describe(value)}`,
    );
  }
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw invalidOption(`push.url is not a URL: ${JSON.stringify(value)}`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw invalidOption(`push.url must be http: or https:, got ${url.protocol}`);
  }
  if (url.username !== '' || url.password !== '') {
    throw invalidOption(
      'push.url must not hold a user name or password (it is shown by topicInfo): send credentials in push.headers, which are never read back',
    );
  }
  return url.href;
}

function checkMethod(value: unknown): PushMethod {
  if (!PUSH_METHODS.includes(value as PushMethod)) {
    throw invalidOption(
      `push.method must be one of ${PUSH_METHODS.join(', ')}, got ${describe(value)}`,
    );
  }
  return value as PushMethod;
}

function checkHeaders(value: unknown): Record<string, string> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw invalidOption(
      `push.headers must be an object of names and values, got ${describe(value)}`,
    );
  }
  const entries = Object.entries(value as Record<string, unknown>);
  if (entries.length > MAX_PUSH_HEADERS) {
    throw invalidOption(`push.headers: at most ${MAX_PUSH_HEADERS} headers, got ${entries.length}`);
  }
  const headers: Record<string, string> = Object.create(null) as Record<string, string>;
  for (const [name, text] of entries) {
    const lower = name.toLowerCase();
    if (!HEADER_NAME.test(name)) {
      throw invalidOption(`push.headers: ${JSON.stringify(name)} is not a header name`);
    }
    if (RESERVED_HEADERS.has(lower) || lower.startsWith('tickwheel-')) {
      throw invalidOption(
        `push.headers: ${name} is set by tickwheel or by HTTP itself and cannot be given`,
      );
    }
    if (Object.hasOwn(headers, lower)) throw invalidOption(`push.headers: ${name} is given twice`);
    // The value is not quoted back: headers hold credentials.
    if (typeof text !== 'string' || !HEADER_VALUE.test(text)) {
      throw invalidOption(
        `push.headers.${name} must be a string of at most 8192 Latin-1 characters with no line breaks (its value is not shown here)`,
      );
    }
    headers[lower] = text;
  }
  return { ...headers };
}

function checkSecret(value: unknown): string {
  if (typeof value !== 'string' || value.length < 16 || value.length > 512) {
    throw invalidOption(
      `push.secret must be a string of 16 to 512 characters (the key requests are signed with; 32 random bytes in hex is a good one), got ${typeof value === 'string' ? `${value.length} characters` : describe(value)}`,
    );
  }
  return value;
}

export function pushView(target: PushTarget | null): PushTargetView | null {
  if (target === null) return null;
  const { url, method, headers, timeoutMs, concurrency } = target;
  return { url, method, headerNames: Object.keys(headers).sort(), timeoutMs, concurrency };
}

export function samePushTarget(a: PushTarget | null, b: PushTarget | null): boolean {
  if (a === null || b === null) return a === b;
  return (
    a.url === b.url &&
    a.method === b.method &&
    a.timeoutMs === b.timeoutMs &&
    a.concurrency === b.concurrency &&
    a.secret === b.secret &&
    JSON.stringify(Object.entries(a.headers).sort()) ===
      JSON.stringify(Object.entries(b.headers).sort())
  );
}

/** Starts a worker over the queue's receive (the engine's, or a cluster node's). */
export type StartWorker = (
  topic: string,
  handler: (message: ReceivedMessage) => Promise<void>,
  settings: Pick<WorkerSettings, 'concurrency' | 'visibilityMs' | 'onError'>,
) => { close(): Promise<void> };

interface Pushing {
  target: PushTarget;
  sender: PushSender;
  /** Undefined until the topic's previous target has stopped (`after`). */
  worker: { close(): Promise<void> } | undefined;
  after: Promise<void> | undefined;
  stats: PushStats;
}

export class Pushers {
  /** How long a stop waits for requests under way before abandoning them (tests change it). */
  static closeGraceMs = 5_000;
  private readonly topics = new Map<string, Pushing>();
  private readonly counts = new Map<string, PushStats>();
  private gate: TopicGate | undefined;
  private readonly stopping = new Set<Promise<void>>();
  private started = false;
  private closed = false;
  readonly guard: PushGuard;
  /** Every target's connections, bounded together (push.maxConnections). */
  private readonly agents: PushAgents;
  /** The reason of the failing pushes of each topic, while they fail (told once). */
  private readonly failing = new Map<string, string>();

  constructor(
    private readonly startWorker: StartWorker,
    options: PushOptions,
    private readonly onFault: FaultReporter = warnFault,
    /** For signatures' timestamps (tests give their own). */
    private readonly wallClock: () => number = Date.now,
  ) {
    this.guard = new PushGuard(options);
    this.agents = new PushAgents(options.maxConnections ?? DEFAULT_PUSH_CONNECTIONS, this.guard);
  }

  /** Follows a queue's topic settings: targets vetted by the guard, applied once stored. */
  follow(gate: TopicGate): void {
    this.gate = gate;
    gate.vetPush = (target) => this.guard.checkTarget(target.url);
    gate.listen((topic, settings) => this.apply(topic, settings.push));
  }

  /** Pushes to the targets the followed topics have, and from then on to those they are given. */
  start(): void {
    if (this.started || this.closed) return;
    this.started = true;
    for (const [topic, settings] of this.gate?.all() ?? []) this.apply(topic, settings.push);
  }

  private apply(topic: string, target: PushTarget | null): void {
    if (this.closed || !this.started) return;
    const current = this.topics.get(topic);
    if (current !== undefined && target !== null && samePushTarget(current.target, target)) return;
    let after: Promise<void> | undefined;
    if (current !== undefined) {
      this.topics.delete(topic);
      this.failing.delete(topic);
      after = this.stop(current);
    }
    if (target !== null) this.begin(topic, target, after);
    // Removed: its counts go once its requests under way have ended, unless it has one again.
    else if (after !== undefined) void after.then(() => this.forget(topic));
  }

  private forget(topic: string): void {
    if (!this.topics.has(topic)) this.counts.delete(topic);
  }

  /** Counts per topic pushed, from its first target on (kept across changes of it). */
  stats(): Record<string, PushStats> {
    return Object.fromEntries([...this.counts].map(([topic, stats]) => [topic, { ...stats }]));
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const pushing of this.topics.values()) this.stop(pushing);
    this.topics.clear();
    while (this.stopping.size > 0) await Promise.all([...this.stopping]);
    this.agents.close();
  }

  /**
   * Pushes a topic to `target` (its entry from now on), once `after` (the stop of its previous target) has ended: the
   * requests under way to that one count against the concurrency too, so a run of changes never
   * has more than `concurrency` requests under way.
   */
  private begin(topic: string, target: PushTarget, after?: Promise<void>): void {
    const sender = new PushSender(target, this.wallClock, this.guard, this.agents);
    const stats = this.counts.get(topic) ?? { inFlight: 0, succeeded: 0, failed: 0 };
    this.counts.set(topic, stats);
    const handler = async (message: ReceivedMessage): Promise<void> => {
      stats.inFlight++;
      try {
        await sender.send(message);
        stats.succeeded++;
        this.healed(topic, target);
      } catch (err) {
        stats.failed++;
        stats.lastError = reasonOf(err);
        stats.lastErrorAt = this.wallClock();
        this.failed(topic, target, err, stats.lastError);
        throw err;
      } finally {
        stats.inFlight--;
      }
    };
    const pushing: Pushing = { target, sender, worker: undefined, after, stats };
    this.topics.set(topic, pushing);
    const start = () => {
      // Replaced or closed while it waited: never started.
      if (this.closed || this.topics.get(topic) !== pushing) return;
      pushing.worker = this.startWorker(topic, handler, {
        concurrency: target.concurrency,
        // Twice the attempt's timeout plus a second: a running push is never handed out again.
        visibilityMs: target.timeoutMs * 2 + 1000,
        // A failed attempt is counted above and kept as its message's lastError: no warning.
        // Failed receives and acks are the queue's trouble and are warned about.
        onError: (err) => {
          if (!(err instanceof PushError)) this.onFault(faultOf(err, { fields: { topic } }));
        },
      });
    };
    if (after === undefined) start();
    else void after.then(start);
  }

  private failed(topic: string, target: PushTarget, err: unknown, reason: string): void {
    if (this.failing.get(topic) === reason) return;
    this.failing.set(topic, reason);
    this.onFault(
      faultOf(err, {
        code: 'ERR_TICKWHEEL_PUSH_FAILED',
        message: `pushes of topic ${topic} to ${originOf(target.url)} fail: ${reason}; each message is retried after its backoff`,
        name: 'TickwheelWarning',
        fields: { topic, target: originOf(target.url), reason },
      }),
    );
  }

  private healed(topic: string, target: PushTarget): void {
    const reason = this.failing.get(topic);
    if (reason === undefined) return;
    this.failing.delete(topic);
    this.onFault({
      code: 'TICKWHEEL_PUSH_HEALED',
      level: 'info',
      message: `pushes of topic ${topic} to ${originOf(target.url)} succeed again (they failed with: ${reason})`,
      name: 'TickwheelWarning',
      fields: { topic, target: originOf(target.url) },
    });
  }

  /**
   * Stops a topic's worker; its requests under way get closeGraceMs to finish (the receiver may
   * have done the work: cutting them at once would turn every stop into retries). Resolves once
   * they have; one never started resolves with the stop it waited for.
   */
  private stop(pushing: Pushing): Promise<void> {
    const worker = pushing.worker;
    if (worker === undefined) {
      return pushing.after ?? Promise.resolve();
    }
    const grace = setTimeout(() => pushing.sender.abort(), Pushers.closeGraceMs);
    const done = worker
      .close()
      .catch((err: unknown) => this.onFault(faultOf(err)))
      .finally(() => {
        clearTimeout(grace);
        this.stopping.delete(done);
      });
    this.stopping.add(done);
    return done;
  }
}

/** A target's scheme, host and port: its path and query may hold a secret of the receiver's. */
function originOf(url: string): string {
  try {
    return new URL(url).origin;
  } catch {
    return '(unparsable URL)';
  }
}
