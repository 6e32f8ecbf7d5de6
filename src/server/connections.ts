/**
 * The connection cap (docs/http-api.md, Limits): connections hold file descriptors the store
 * needs too, so they are capped below the file limit. At the cap, the connection that has waited
 * longest without a whole request is closed for the newcomer; one serving a request never is, and
 * when all are, the newcomer gets a 503 written to its socket. `waiting` is in the order
 * connections started waiting (a Set keeps insertion order); Node has no event for a request
 * arriving whole, so such a connection leaves it at the next search for room (O(1) amortised).
 *
 * A health check must not fail because the server is busy (a supervisor would restart a healthy
 * server): when none can be closed, a newcomer is let in on probation, PROBATION_SLOTS of them
 * at most. On probation, a health check is answered and the connection closed; any other request
 * gets the 503 (the server's hook, before its route runs: onProbation), as does a connection
 * whose request has not arrived whole within PROBATION_MS.
 *
 * One connection may pipeline requests, and Node starts each as it arrives, whatever is still
 * unanswered before it: a long poll writes nothing until it ends, so nothing pushes back on the
 * sender. Past MAX_UNANSWERED requests unanswered on a connection, the next gets the 503 without
 * its route running (pipelinedTooDeep); those small answers wait in line behind the others, and
 * Node stops reading a connection whose waiting answers fill its socket's buffer.
 */

import { readFileSync } from 'node:fs';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { rawResponse } from './errors.js';

/** File descriptors assumed when the process's limit cannot be read (not Linux). */
const ASSUMED_FILE_LIMIT = 1024;
/** Fewest descriptors kept for the store, Node itself and push targets' sockets. */
const MIN_RESERVED_FILES = 128;
/** Bounds of the default cap, however high or low the file limit (each socket costs memory). */
const MAX_DEFAULT_CONNECTIONS = 4096;
const MIN_DEFAULT_CONNECTIONS = 16;
const MAX_PUSH_CONNECTIONS = 256;
/** Least time between two warnings that the cap was reached. */
const WARN_INTERVAL_MS = 60_000;
/** Connections past the cap let in for a health check, and the time they get to send it. */
const PROBATION_SLOTS = 8;
const PROBATION_MS = 2000;
/** Requests a connection may have received and not yet had answered (pipelined). */
export const MAX_UNANSWERED = 32;

/**
 * The soft limit on open files (RLIMIT_NOFILE) from /proc/self/limits (undefined without it,
 * Infinity when unlimited). Node raises the soft limit to the hard one at start-up.
 */
export function fileLimit(limits = '/proc/self/limits'): number | undefined {
  let text: string;
  try {
    text = readFileSync(limits, 'utf8');
  } catch {
    return undefined;
  }
  const match = /^Max open files\s+(\S+)/m.exec(text);
  if (match === null) return undefined;
  if (match[1] === 'unlimited') return Number.POSITIVE_INFINITY;
  const soft = Number.parseInt(match[1], 10);
  return Number.isSafeInteger(soft) && soft > 0 ? soft : undefined;
}

/**
 * The default cap for a process that may open `files` descriptors: a quarter of them (at least
 * 128) left to the store's files, Node and push targets' sockets; the rest, 16 to 4096.
 */
export function defaultMaxConnections(files = fileLimit() ?? ASSUMED_FILE_LIMIT): number {
  if (files === Number.POSITIVE_INFINITY) return MAX_DEFAULT_CONNECTIONS;
  const reserved = Math.max(MIN_RESERVED_FILES, Math.floor(files / 4));
  return Math.min(MAX_DEFAULT_CONNECTIONS, Math.max(MIN_DEFAULT_CONNECTIONS, files - reserved));
}

/**
 * The default bound on connections to push targets (push.maxConnections) for such a process:
 * half of the files defaultMaxConnections leaves aside, 8 to 256.
 */
export function defaultPushConnections(files = fileLimit() ?? ASSUMED_FILE_LIMIT): number {
  if (files === Number.POSITIVE_INFINITY) return MAX_PUSH_CONNECTIONS;
  const reserved = Math.max(MIN_RESERVED_FILES, Math.floor(files / 4));
  return Math.min(MAX_PUSH_CONNECTIONS, Math.max(8, Math.floor(reserved / 2)));
}

interface Connection {
  /** Requests received and not yet answered (pipelined ones count each). */
  requests: number;
  /** The last request received, while `requests` > 0. */
  current: IncomingMessage | undefined;
}

export interface ConnectionEvents {
  /** A connection was closed to make room (`shed`), or refused because none could be. */
  closedAtCap(action: 'shed' | 'refused'): void;
  /** Said at most once a minute while the cap is being reached. */
  warn(message: string): void;
}

export interface Connections {
  readonly open: number;
  /** Whether a request's connection came past the cap: only a health check is answered. */
  onProbation(socket: Socket): boolean;
  /** A request on probation was refused (counted, and warned of, as a refused connection). */
  refused(socket: Socket): void;
  /** Whether a request's connection has more than MAX_UNANSWERED unanswered, itself included. */
  pipelinedTooDeep(socket: Socket): boolean;
  /**
   * For a closing server: ends the connections serving no request now, and the others as soon
   * as their last response is done (responses carry Connection: close once closing).
   */
  closeIdle(): void;
}

export const AT_CAPACITY =
  'the server has as many connections as it takes, all serving requests; retry shortly';
export const PIPELINED_TOO_DEEP = `more than ${MAX_UNANSWERED} requests are unanswered on this connection (HTTP pipelining): wait for their answers, or send this one on another connection`;

// Refused before a byte of the request was read: nothing was done, as every 503 says.
const REFUSAL = rawResponse(503, 'ERR_TICKWHEEL_CAPACITY', AT_CAPACITY, 'Retry-After: 1\r\n');

export function trackConnections(
  server: Server,
  maxConnections: number,
  events: ConnectionEvents,
): Connections {
  const all = new Map<Socket, Connection>();
  const waiting = new Set<Socket>();
  /** Connections on probation, and whether their request has arrived. */
  const probation = new Map<Socket, boolean>();
  let closing = false;
  let lastWarning = Number.NEGATIVE_INFINITY;
  let closedSinceWarning = 0;

  const drop = (socket: Socket, action: 'shed' | 'refused') => {
    all.delete(socket);
    waiting.delete(socket);
    events.closedAtCap(action);
    closedSinceWarning += 1;
    const now = performance.now();
    if (now - lastWarning >= WARN_INTERVAL_MS) {
      events.warn(
        `${maxConnections} connections open (the cap, --max-connections): closed ` +
          `${closedSinceWarning} that had not sent a whole request to make room for new ones`,
      );
      lastWarning = now;
      closedSinceWarning = 0;
    }
  };

  /** Closes the connection that has waited longest, or refuses `newcomer` if it is the only one. */
  const makeRoom = (newcomer: Socket) => {
    for (const socket of waiting) {
      if (socket === newcomer) break;
      const current = all.get(socket)?.current;
      if (current !== undefined && current.complete) {
        waiting.delete(socket);
        continue;
      }
      drop(socket, 'shed');
      socket.destroy();
      return;
    }
    if (probation.size < PROBATION_SLOTS && !closing) {
      probation.set(newcomer, false);
      all.delete(newcomer);
      waiting.delete(newcomer);
      const timer = setTimeout(() => {
        // No whole request in time (a byte now and then keeps no slot): refused as at once.
        if (probation.get(newcomer) !== false || newcomer.destroyed) return;
        refuse(newcomer);
      }, PROBATION_MS);
      newcomer.once('close', () => {
        clearTimeout(timer);
        probation.delete(newcomer);
      });
      return;
    }
    refuse(newcomer);
  };

  const refuse = (socket: Socket) => {
    drop(socket, 'refused');
    socket.write(REFUSAL, () => socket.destroy());
  };

  server.on('connection', (socket: Socket) => {
    all.set(socket, { requests: 0, current: undefined });
    waiting.add(socket);
    socket.once('close', () => {
      all.delete(socket);
      waiting.delete(socket);
    });
    if (all.size > maxConnections) makeRoom(socket);
  });

  // Before the server's own listener, whose hooks ask pipelinedTooDeep: this request counts.
  server.prependListener('request', (request: IncomingMessage, response: ServerResponse) => {
    const socket = request.socket;
    if (probation.has(socket)) {
      // One request, answered with Connection: close (the server's hook set it).
      probation.set(socket, true);
      response.once('close', () => socket.destroy());
      return;
    }
    const connection = all.get(socket);
    if (connection === undefined) return;
    connection.requests += 1;
    connection.current = request;
    response.once('close', () => {
      connection.requests -= 1;
      if (connection.requests > 0) return;
      connection.current = undefined;
      if (closing) {
        socket.destroy();
        return;
      }
      // Waiting again, for its next request: at the back of the line.
      waiting.delete(socket);
      if (all.has(socket)) waiting.add(socket);
    });
  });

  return {
    get open() {
      return all.size + probation.size;
    },
    onProbation(socket) {
      return probation.has(socket);
    },
    closeIdle() {
      closing = true;
      for (const [socket, { requests }] of all) if (requests === 0) socket.destroy();
      for (const [socket, requested] of probation) if (!requested) socket.destroy();
    },
    refused(socket) {
      drop(socket, 'refused');
    },
    pipelinedTooDeep(socket) {
      return (all.get(socket)?.requests ?? 0) > MAX_UNANSWERED;
    },
  };
}
