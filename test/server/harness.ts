import { afterEach } from 'vitest';
import { DelayQueue, MemoryStore, type DelayQueueOpenOptions } from '../../src/delay-queue.js';
import { createServer, type ServerOptions, type TickwheelServer } from '../../src/server/index.js';

export interface Answer {
  status: number;
  headers: Record<string, unknown>;
  body: any; // eslint-disable-line @typescript-eslint/no-explicit-any
  text: string;
}

export interface TestServer {
  server: TickwheelServer;
  queue: DelayQueue;
  call(
    method: string,
    url: string,
    body?: unknown,
    headers?: Record<string, string>,
  ): Promise<Answer>;
}

const open: Array<() => Promise<void>> = [];

afterEach(async () => {
  await Promise.all(open.splice(0).map((close) => close()));
});

/** A server on an in-memory queue (real clock), closed after the test. */
export async function openServer(
  options: Partial<ServerOptions> = {},
  queueOptions: Partial<DelayQueueOpenOptions> = {},
): Promise<TestServer> {
  const queue = await DelayQueue.open({ store: new MemoryStore(), ...queueOptions });
  const server = await createServer({ queue, logLevel: 'silent', ...options });
  open.push(async () => {
    await server.close();
    await queue.close();
  });
  return { server, queue, call: injector(server) };
}

/** openServer, listening on a loopback port (for tests that need real sockets). */
export async function listeningServer(
  options: Partial<ServerOptions> = {},
  queueOptions: Partial<DelayQueueOpenOptions> = {},
): Promise<TestServer & { port: number }> {
  const opened = await openServer(options, queueOptions);
  await opened.server.listen({ port: 0, host: '127.0.0.1' });
  return { ...opened, port: (opened.server.server.address() as { port: number }).port };
}

/** Requests through the server's inject(), no sockets; the body is parsed when it is JSON. */
export function injector(server: TickwheelServer): TestServer['call'] {
  return async (method, url, body, headers = {}) => {
    const response = await server.inject({
      method: method as 'GET',
      url,
      headers,
      ...(body === undefined
        ? {}
        : typeof body === 'string'
          ? { payload: body }
          : {
              payload: JSON.stringify(body),
              headers: { 'content-type': 'application/json', ...headers },
            }),
    });
    let parsed: unknown;
    try {
      parsed = JSON.parse(response.body);
    } catch {
      parsed = undefined;
    }
    return {
      status: response.statusCode,
      headers: response.headers,
      body: parsed,
      text: response.body,
    };
  };
}

export { sleep } from '../support/wait-for.js';
