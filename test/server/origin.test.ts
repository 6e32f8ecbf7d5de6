/**
 * Requests a web page on another origin can make. Without CORS headers a browser lets a page
 * send a "simple" request (GET, or a POST with no body or a form / text/plain body) anywhere,
 * it just cannot read the answer; so a POST must carry `content-type: application/json`, which
 * no simple request can. And a page whose name is rebound to 127.0.0.1 (DNS rebinding) reaches
 * the server as its own origin, but its Host header still carries its name: the server answers
 * only Host names it knows, with a token too (/metrics and the dashboard's page need none).
 */

import { request } from 'node:http';
import { connect } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { createServer } from '../../src/server/index.js';
import { openServer } from './harness.js';
import { startServer, type ServerProcess } from './process.js';
import { useTempDirs } from '../support/temp-dir.js';

const tempDir = useTempDirs('origin');

const JSON_TYPE = { 'content-type': 'application/json' };

describe('POST needs content-type: application/json', () => {
  it.each([
    ['no content-type and no body', '', {}],
    ['a form', 'max=5', { 'content-type': 'application/x-www-form-urlencoded' }],
    ['text/plain', '{"max":5}', { 'content-type': 'text/plain' }],
    ['an empty text/plain body', '', { 'content-type': 'text/plain;charset=UTF-8' }],
    ['a multipart form', '', { 'content-type': 'multipart/form-data; boundary=x' }],
  ])('refuses a receive sent with %s, and hands out nothing', async (_what, body, headers) => {
    const { call, queue } = await openServer();
    await queue.schedule({ topic: 'jobs', payload: 1 });
    const res = await call('POST', '/v1/topics/jobs/receive', body, headers);
    expect(res.status).toBe(415);
    expect(res.body.error.code).toBe('ERR_TICKWHEEL_UNSUPPORTED_MEDIA_TYPE');
    expect(res.body.error.message).toContain('application/json');
    expect((await queue.stats()).delivered).toBe(0);
  });

  it.each([
    ['/v1/topics/t/messages', '{"payload":1}'],
    ['/v1/messages:batch', '{"messages":[{"topic":"t","payload":1}]}'],
    ['/v1/ack', '{"receipts":["r"]}'],
    ['/v1/nack', '{"receipts":["r"]}'],
    ['/v1/messages/m/requeue', ''],
  ])('refuses POST %s as a simple request', async (url, body) => {
    const { call } = await openServer();
    const res = await call('POST', url, body, { 'content-type': 'text/plain' });
    expect(res.status).toBe(415);
    expect(res.body.error.code).toBe('ERR_TICKWHEEL_UNSUPPORTED_MEDIA_TYPE');
  });

  it('accepts an empty POST with content-type: application/json (any parameters)', async () => {
    const { call, queue } = await openServer();
    await queue.schedule({ topic: 'jobs', payload: 1 });
    for (const type of ['application/json', 'Application/JSON; charset=utf-8']) {
      const res = await call('POST', '/v1/topics/none/receive', '', { 'content-type': type });
      expect(res, type).toMatchObject({ status: 200, body: { messages: [] } });
    }
  });

  it('asks for the token before anything else on a server with one', async () => {
    const { call } = await openServer({ token: 'tok' });
    const res = await call('POST', '/v1/topics/t/receive', '', {});
    expect(res.status).toBe(401);
  });
});

describe('the Host header must name the server', () => {
  it.each([
    'evil.example',
    'evil.example:7700',
    'localhost.evil.example',
    '127.0.0.1.nip.io:7700',
    'attacker',
  ])('answers Host %s with 421 on every route', async (host) => {
    const { call, queue } = await openServer();
    await queue.schedule({ topic: 'jobs', payload: 1 });
    for (const [method, url, body] of [
      ['POST', '/v1/topics/jobs/receive', {}],
      ['GET', '/v1/stats'],
      ['GET', '/v1/dashboard'],
      ['GET', '/metrics'],
      ['GET', '/healthz'],
      ['GET', '/'],
    ] as Array<[string, string, unknown?]>) {
      const res = await call(method, url, body, { host });
      expect(res.status, `${method} ${url}`).toBe(421);
      expect(res.body.error.code).toBe('ERR_TICKWHEEL_HOST_NOT_ALLOWED');
      expect(res.body.error.message).toContain('--allowed-hosts');
    }
    expect((await queue.stats()).delivered).toBe(0);
  });

  it.each([
    'localhost',
    'localhost:7700',
    'LOCALHOST:7700',
    'localhost.:7700',
    '127.0.0.1:7700',
    '127.0.0.1',
    '[::1]:7700',
    '[::1]',
    '10.1.2.3:7700',
  ])('serves Host %s', async (host) => {
    const { call } = await openServer();
    const res = await call('GET', '/v1/stats', undefined, { host });
    expect(res.status).toBe(200);
  });

  it('serves the names given in allowedHosts (the --host of the CLI)', async () => {
    const { call } = await openServer({ allowedHosts: ['queue.internal'] });
    expect(
      (await call('GET', '/v1/stats', undefined, { host: 'queue.internal:7700' })).status,
    ).toBe(200);
    expect((await call('GET', '/v1/stats', undefined, { host: 'other.internal' })).status).toBe(
      421,
    );
  });

  it('refuses a Host it does not know with a token too, even to a request that has it', async () => {
    const { call } = await openServer({ token: 'tok' });
    const authorization = 'Bearer tok';
    for (const url of ['/v1/stats', '/metrics', '/healthz', '/']) {
      const res = await call('GET', url, undefined, { host: 'evil.example', authorization });
      expect(res.status, url).toBe(421);
      expect(res.body.error.code, url).toBe('ERR_TICKWHEEL_HOST_NOT_ALLOWED');
    }
    const named = await openServer({ token: 'tok', allowedHosts: ['queue.example.com'] });
    const res = await named.call('GET', '/v1/stats', undefined, {
      host: 'queue.example.com',
      authorization,
    });
    expect(res.status).toBe(200);
  });

  it('checks allowedHosts', async () => {
    await expect(createServer({ dir: '/nonexistent', allowedHosts: ['a b'] })).rejects.toThrow(
      /allowedHosts/,
    );
    // A long name with a bad last character is refused at once (the pattern does not backtrack).
    await expect(
      createServer({ dir: '/nonexistent', allowedHosts: [`${'a'.repeat(240)}!`] }),
    ).rejects.toThrow(/allowedHosts/);
  });
});

describe('over a real socket', () => {
  it('refuses a rebound Host and a simple-request POST', async () => {
    const { server, queue } = await openServer();
    await queue.schedule({ topic: 'jobs', payload: 1 });
    await server.listen({ port: 0, host: '127.0.0.1' });
    const { port } = server.server.address() as { port: number };
    const url = `http://127.0.0.1:${port}/v1/topics/jobs/receive`;
    // What a page on another origin can send without a preflight.
    const simple = await fetch(url, { method: 'POST' });
    expect(simple.status).toBe(415);
    const form = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'text/plain' },
      body: '{}',
    });
    expect(form.status).toBe(415);
    expect((await queue.stats()).delivered).toBe(0);
    const ok = await fetch(url, { method: 'POST', headers: JSON_TYPE });
    expect(ok.status).toBe(200);
    expect(((await ok.json()) as { messages: unknown[] }).messages).toHaveLength(1);
  });

  it('answers an HTTP/1.1 request without Host with a JSON 400; HTTP/1.0 needs none', async () => {
    const { server } = await openServer();
    await server.listen({ port: 0, host: '127.0.0.1' });
    const { port } = server.server.address() as { port: number };
    const raw = async (head: string): Promise<string> => {
      const socket = connect(port, '127.0.0.1');
      socket.end(`${head}\r\n\r\n`);
      let text = '';
      for await (const chunk of socket) text += String(chunk);
      return text;
    };
    const missing = await raw('GET /v1/stats HTTP/1.1');
    expect(missing).toMatch(/^HTTP\/1\.1 400 /);
    const body = JSON.parse(missing.slice(missing.indexOf('\r\n\r\n') + 4)) as {
      error: { code: string; message: string };
    };
    expect(body.error).toMatchObject({ code: 'ERR_TICKWHEEL_INVALID_REQUEST' });
    expect(body.error.message).toContain('Host');
    expect(await raw('GET /healthz HTTP/1.0')).toMatch(/^HTTP\/1\.1 200 /);
  });
});

describe('tickwheel serve with a token', () => {
  const servers: ServerProcess[] = [];
  afterEach(async () => {
    await Promise.all(servers.splice(0).map((server) => server.kill()));
  });

  /** GET with a Host header of our choosing (fetch sets its own). */
  function get(url: string, host: string): Promise<{ status: number; body: unknown }> {
    return new Promise((resolve, reject) => {
      const req = request(url, { headers: { host, authorization: 'Bearer tok' } }, (res) => {
        let text = '';
        res.setEncoding('utf8').on('data', (chunk: string) => (text += chunk));
        res.on('end', () => {
          let body: unknown = text;
          try {
            body = JSON.parse(text);
          } catch {
            // /metrics answers text
          }
          resolve({ status: res.statusCode ?? 0, body });
        });
      });
      req.on('error', reject);
      req.end();
    });
  }

  it('answers a rebound Host with 421 on /metrics and /v1, and serves --allowed-hosts', async () => {
    const dir = tempDir();
    const server = await startServer([
      '--dir',
      dir,
      '--token',
      'tok',
      '--host',
      '127.0.0.1',
      '--allowed-hosts',
      'queue.internal, tw.example.com',
    ]);
    servers.push(server);
    for (const path of ['/metrics', '/v1/stats']) {
      const refused = await get(`${server.url}${path}`, 'evil.example:7700');
      expect(refused.status, path).toBe(421);
      expect(refused.body, path).toMatchObject({
        error: { code: 'ERR_TICKWHEEL_HOST_NOT_ALLOWED' },
      });
    }
    expect((await get(`${server.url}/v1/stats`, 'queue.internal:7700')).status).toBe(200);
    expect((await get(`${server.url}/v1/stats`, 'tw.example.com')).status).toBe(200);
  });
});
