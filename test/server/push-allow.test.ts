import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startReceiver, type Receiver } from '../queue/push-receiver.js';
import { requireBuiltCli, startServer, type ServerProcess } from './process.js';
import { useTempDirs } from '../support/temp-dir.js';
import { waitFor } from '../support/wait-for.js';

const tempDir = useTempDirs('push-allow');

/**
 * `tickwheel serve` and internal push targets, as an operator runs it: a real server process
 * refuses a target on loopback unless started with --push-allow; allowed, a receiver that
 * answers 500 with a secret in its body fails the attempts, and the secret is in no answer of
 * the server (the message, its dead letter, the stats) and not in its log.
 */

const LEAK = 'internal-admin-token-77e1a0';
const SECRET = 'serve-push-secret-0123456789';
const running: Array<{ kill?(): Promise<void>; close?(): Promise<void> }> = [];

beforeAll(() => requireBuiltCli());
afterEach(async () => {
  for (const thing of running.splice(0)) await (thing.kill ?? thing.close)?.call(thing);
});

async function serve(...flags: string[]): Promise<ServerProcess> {
  const dir = tempDir();
  const server = await startServer(['--dir', dir, ...flags]);
  running.push(server);
  return server;
}

async function leakyReceiver(): Promise<Receiver> {
  const receiver = await startReceiver(() => ({ status: 500, body: `token=${LEAK}` }));
  running.push(receiver);
  return receiver;
}

async function call(server: ServerProcess, method: string, path: string, body?: unknown) {
  const response = await fetch(`${server.url}${path}`, {
    method,
    ...(body === undefined
      ? {}
      : { body: JSON.stringify(body), headers: { 'content-type': 'application/json' } }),
  });
  return { status: response.status, text: await response.text() };
}

describe('tickwheel serve --push-allow', () => {
  it('refuses a loopback target by default, with the option to allow it', async () => {
    const receiver = await leakyReceiver();
    const server = await serve();
    const set = await call(server, 'PATCH', '/v1/topics/hooks', {
      push: { url: receiver.url, secret: SECRET },
    });
    expect(set.status).toBe(403);
    const error = JSON.parse(set.text).error;
    expect(error.code).toBe('ERR_TICKWHEEL_PUSH_NOT_ALLOWED');
    expect(error.message).toContain('--push-allow 127.0.0.1');
    expect(JSON.parse((await call(server, 'GET', '/v1/topics/hooks')).text).push).toBeNull();
  });

  it('pushes where allowed; a failed answer leaves its status, never its body', async () => {
    const receiver = await leakyReceiver();
    const server = await serve(
      '--push-allow',
      '127.0.0.0/8',
      '--push-allow',
      '10.9.0.0/16,receiver.internal',
    );
    const set = await call(server, 'PATCH', '/v1/topics/hooks', {
      push: { url: receiver.url, secret: SECRET },
    });
    expect(set.status).toBe(200);
    const made = await call(server, 'POST', '/v1/topics/hooks/messages', {
      id: 'm',
      payload: 1,
      maxAttempts: 2,
      backoff: { type: 'fixed', delayMs: 10 },
    });
    expect(made.status).toBe(201);
    await waitFor(
      async () => JSON.parse((await call(server, 'GET', '/v1/messages/m')).text).status === 'dead',
      { timeoutMs: 15_000 },
    );
    expect(receiver.requests).toHaveLength(2);
    const message = await call(server, 'GET', '/v1/messages/m');
    expect(JSON.parse(message.text).lastError).toBe('PushError: HTTP 500 Internal Server Error');
    const dead = await call(server, 'GET', '/v1/topics/hooks/dead');
    expect(dead.text).toContain('"lastError":"PushError: HTTP 500 Internal Server Error"');
    const answers = [
      message.text,
      dead.text,
      (await call(server, 'GET', '/v1/stats')).text,
      (await call(server, 'GET', '/metrics')).text,
      server.stdout(),
      server.stderr(),
    ];
    expect(answers.join('\n')).toContain('HTTP 500 Internal Server Error');
    expect(answers.join('\n')).not.toContain(LEAK);
  });
});
