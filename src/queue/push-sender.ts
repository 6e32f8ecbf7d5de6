/**
 * One push target's signed HTTP requests (push.ts). 2xx is success; anything else fails the
 * attempt with a PushError saying why, never with the answer's body or reason phrase (the
 * receiver may be an internal service, whose answer must not reach lastError or logs). Only 307
 * and 308 to the same origin are followed, so a signed request and the target's headers never
 * go to another host. The timeout bounds the whole attempt, redirects included.
 */

import {
  Agent as HttpAgent,
  STATUS_CODES,
  request as httpRequest,
  type ClientRequest,
  type IncomingMessage,
} from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import { performance } from 'node:perf_hooks';
import type { Duplex } from 'node:stream';
import { PUSH_HEADER, signPush } from '../protocol/push-signature.js';
import { TickwheelError } from '../errors.js';
import type { PushGuard } from './push-guard.js';
import { traceHeaders } from './tracing.js';
import type { PushTarget } from './push.js';
import type { ReceivedMessage } from './types.js';

/** A failed push attempt: its message is the delivery's lastError. */
export class PushError extends TickwheelError<'ERR_TICKWHEEL_PUSH_FAILED'> {
  constructor(message: string) {
    super('ERR_TICKWHEEL_PUSH_FAILED', message);
    this.name = 'PushError';
  }
}

/** Same-origin 307/308 redirects followed in one attempt, at most. */
export const MAX_PUSH_REDIRECTS = 5;
const USER_AGENT = 'tickwheel-push/1';

type Answer = { status: number; location: string | undefined };

/**
 * The connections of every push target of a queue: one pool, so that its bound (maxTotalSockets)
 * holds over all topics; a request past it waits in the pool for a free connection.
 */
export class PushAgents {
  private readonly http: HttpAgent;
  private readonly https: HttpsAgent;

  constructor(maxConnections: number, guard: PushGuard) {
    const options = {
      keepAlive: true,
      maxTotalSockets: maxConnections,
      scheduling: 'lifo' as const,
      lookup: guard.lookup,
    };
    this.http = new HttpAgent(options);
    this.https = new HttpsAgent(options);
  }

  for(url: URL): HttpAgent {
    return url.protocol === 'https:' ? this.https : this.http;
  }

  close(): void {
    this.http.destroy();
    this.https.destroy();
  }
}

export class PushSender {
  private readonly url: URL;
  private readonly agent: HttpAgent;
  /** Requests under way, each with how to cut it off (abort()). */
  private readonly underway = new Map<ClientRequest, (err: PushError) => void>();
  private abandoned = false;

  constructor(
    private readonly target: PushTarget,
    private readonly wallClock: () => number,
    private readonly guard: PushGuard,
    agents: PushAgents,
  ) {
    this.url = new URL(target.url);
    this.agent = agents.for(this.url);
  }

  async send(message: ReceivedMessage): Promise<void> {
    const { body, type } = encode(message.payload);
    const signed = {
      id: message.id,
      topic: message.topic,
      attempt: message.attempts,
      deliverAt: message.deliverAt,
    };
    const headers: Record<string, string> = {
      // A target may give its own User-Agent; the rest below is tickwheel's.
      'user-agent': USER_AGENT,
      ...this.target.headers,
      'content-length': String(body.byteLength),
      [PUSH_HEADER.id]: signed.id,
      [PUSH_HEADER.topic]: signed.topic,
      [PUSH_HEADER.attempt]: String(signed.attempt),
      [PUSH_HEADER.deliverAt]: String(signed.deliverAt),
    };
    if (type !== undefined) headers['content-type'] = type;
    traceHeaders(headers, message.trace);
    const deadline = performance.now() + this.target.timeoutMs;
    let url = this.url;
    for (let redirects = 0; ; redirects++) {
      // Signed as sent: a redirect followed late is not refused as old.
      const timestamp = Math.floor(this.wallClock() / 1000);
      headers[PUSH_HEADER.timestamp] = String(timestamp);
      headers[PUSH_HEADER.signature] = signPush(this.target.secret, timestamp, signed, body);
      const answer = await this.request(url, headers, body, deadline);
      if (answer.status >= 200 && answer.status < 300) return;
      if (answer.status < 300 || answer.status >= 400)
        throw new PushError(statusLine(answer.status));
      url = this.redirect(url, answer, redirects);
    }
  }

  private redirect(from: URL, answer: Answer, redirects: number): URL {
    const status = answer.status;
    if (answer.location === undefined) {
      throw new PushError(`${statusLine(status)} with no Location header`);
    }
    let next: URL;
    try {
      next = new URL(answer.location, from);
    } catch {
      throw new PushError(`${statusLine(status)} to a Location that is not a URL`);
    }
    if (status !== 307 && status !== 308) {
      throw new PushError(
        `${statusLine(status)}: redirect not followed: only 307 and 308 to the same origin are (they keep the method and body)`,
      );
    }
    if (next.origin !== this.url.origin) {
      throw new PushError(
        `${statusLine(status)}: redirect to another origin not followed: signed requests go only to ${this.url.origin}`,
      );
    }
    if (redirects >= MAX_PUSH_REDIRECTS) {
      throw new PushError(`more than ${MAX_PUSH_REDIRECTS} redirects`);
    }
    return next;
  }

  /** One request; resolves once a 2xx answer has ended, or at once with another status. */
  private request(
    url: URL,
    headers: Record<string, string>,
    body: Buffer,
    deadline: number,
  ): Promise<Answer> {
    const left = Math.ceil(deadline - performance.now());
    if (left <= 0) return Promise.reject(this.timedOut());
    if (this.abandoned) return Promise.reject(abandoned());
    try {
      // Node connects to a literal address without a lookup: checked here instead.
      this.guard.checkLiteral(url.hostname);
    } catch (err) {
      return Promise.reject(new PushError(networkReason(err as NodeJS.ErrnoException)));
    }
    const send = url.protocol === 'https:' ? httpsRequest : httpRequest;
    let request: ClientRequest;
    try {
      request = send(url, { method: this.target.method, headers, agent: this.agent });
    } catch (err) {
      // Node refused to build it (a header it will not send): the attempt fails, nothing more.
      return Promise.reject(new PushError(`the request cannot be sent: ${(err as Error).message}`));
    }
    return new Promise<Answer>((resolve, reject) => {
      let failure: PushError | undefined;
      let settled = false;
      let connected = false;
      request.once('socket', () => (connected = true));
      const finish = (answer: Answer | undefined, err?: PushError) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        this.underway.delete(request);
        if (answer !== undefined) resolve(answer);
        else reject(err ?? failure ?? new PushError('the request failed'));
      };
      const timer = setTimeout(() => {
        failure ??= connected ? this.timedOut() : this.noConnection();
        request.destroy();
      }, left);
      this.underway.set(request, (err) => {
        failure ??= err;
        request.destroy();
      });
      request.on('error', (err: NodeJS.ErrnoException) => {
        finish(undefined, failure ?? new PushError(networkReason(err)));
      });
      // A 101 Switching Protocols nobody asked for: Node hands over the connection instead of
      // a response. Not an answer: the attempt fails, the connection goes.
      request.on('upgrade', (response: IncomingMessage, socket: Duplex) => {
        socket.destroy();
        finish({ status: response.statusCode ?? 101, location: undefined });
      });
      // Ended with neither an answer nor an error (a destroy after a dropped upgrade emits
      // neither): failed, so that its concurrency slot and close() are not held for ever.
      request.on('close', () => {
        finish(undefined, failure ?? new PushError('the connection closed with no answer'));
      });
      request.on('response', (response: IncomingMessage) => {
        const status = response.statusCode ?? 0;
        const location = response.headers.location;
        response.on('error', () => undefined);
        if (status < 200 || status >= 300) {
          // Not read, and the connection not waited on for it.
          finish({ status, location });
          response.destroy();
          return;
        }
        // Read to its end (and dropped), so the connection can be used again.
        response.resume();
        response.on('end', () => finish({ status, location }));
        // Closed before its end (the receiver hung up, a timeout, an abort): the attempt failed.
        response.on('close', () => {
          if (!settled) {
            finish(
              undefined,
              failure ?? new PushError(`${statusLine(status)}: the answer was cut off`),
            );
          }
        });
      });
      request.end(body);
    });
  }

  private timedOut(): PushError {
    return new PushError(`no answer within ${this.target.timeoutMs} ms`);
  }

  private noConnection(): PushError {
    const most = this.agent.maxTotalSockets;
    return new PushError(
      `no push connection free within ${this.target.timeoutMs} ms: all ${most} (push.maxConnections) are in use`,
    );
  }

  /** Fails every request under way and refuses later ones (after Pushers.stop's grace). */
  abort(): void {
    this.abandoned = true;
    for (const cut of [...this.underway.values()]) cut(abandoned());
  }
}

function abandoned(): PushError {
  return new PushError('abandoned: still running when the queue closed or the push target changed');
}

/** `HTTP 503 Service Unavailable`: the status and HTTP's own reason phrase for it. */
function statusLine(status: number): string {
  const phrase = STATUS_CODES[status];
  return phrase === undefined ? `HTTP ${status}` : `HTTP ${status} ${phrase}`;
}

function networkReason(err: NodeJS.ErrnoException): string {
  return err.code === undefined ? err.message : `${err.code}: ${err.message}`;
}

function encode(payload: unknown): { body: Buffer; type: string | undefined } {
  if (payload instanceof Uint8Array) {
    return {
      body: Buffer.from(payload.buffer, payload.byteOffset, payload.byteLength),
      type: 'application/octet-stream',
    };
  }
  const text = JSON.stringify(payload) as string | undefined;
  if (text === undefined) return { body: Buffer.alloc(0), type: undefined };
  return { body: Buffer.from(text, 'utf8'), type: 'application/json' };
}
