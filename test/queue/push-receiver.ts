/**
 * A real HTTP receiver for push tests: listens on 127.0.0.1, records every request (headers and
 * raw body), counts requests under way, and answers as the test's `behaviour` says: a status,
 * after a delay, or never (hang, until the receiver closes).
 */

import {
  createServer,
  type IncomingHttpHeaders,
  type Server,
  type ServerResponse,
} from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Received {
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  body: Buffer;
  at: number;
}

export type Behaviour = (
  request: Received,
  index: number,
) => { status: number; body?: string; headers?: Record<string, string>; delayMs?: number } | 'hang';

export interface Receiver {
  url: string;
  port: number;
  requests: Received[];
  /** Most requests under way at once so far. */
  maxInFlight(): number;
  inFlight(): number;
  behaviour: Behaviour;
  /** Resolves once `count` requests have arrived (rejects after `ms`). */
  waitFor(count: number, ms?: number): Promise<void>;
  close(): Promise<void>;
}

export async function startReceiver(
  behaviour: Behaviour = () => ({ status: 200 }),
  host = '127.0.0.1',
): Promise<Receiver> {
  const requests: Received[] = [];
  const hanging = new Set<ServerResponse>();
  let inFlight = 0;
  let most = 0;
  const waits: Array<{ count: number; resolve: () => void }> = [];
  const server: Server = createServer((req, res) => {
    inFlight++;
    most = Math.max(most, inFlight);
    let ended = false;
    const end = () => {
      if (!ended) {
        ended = true;
        inFlight--;
      }
    };
    res.on('close', end);
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const received: Received = {
        method: req.method ?? '',
        path: req.url ?? '',
        headers: req.headers,
        body: Buffer.concat(chunks),
        at: Date.now(),
      };
      const index = requests.length;
      requests.push(received);
      for (const wait of [...waits]) {
        if (requests.length >= wait.count) {
          waits.splice(waits.indexOf(wait), 1);
          wait.resolve();
        }
      }
      const answer = receiver.behaviour(received, index);
      if (answer === 'hang') {
        hanging.add(res);
        return;
      }
      const reply = () => {
        res.writeHead(answer.status, answer.headers ?? {});
        res.end(answer.body ?? '');
      };
      if (answer.delayMs === undefined) reply();
      else setTimeout(reply, answer.delayMs);
    });
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  const port = (server.address() as AddressInfo).port;
  const receiver: Receiver = {
    url: `http://${host}:${port}`,
    port,
    requests,
    behaviour,
    maxInFlight: () => most,
    inFlight: () => inFlight,
    waitFor(count, ms = 10_000) {
      if (requests.length >= count) return Promise.resolve();
      return new Promise<void>((resolve, reject) => {
        const timer = setTimeout(
          () => reject(new Error(`${requests.length} requests of ${count} after ${ms} ms`)),
          ms,
        );
        waits.push({
          count,
          resolve: () => {
            clearTimeout(timer);
            resolve();
          },
        });
      });
    },
    async close() {
      for (const res of hanging) res.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  return receiver;
}
