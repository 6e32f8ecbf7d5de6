/**
 * GET /openapi.json, held to the server it describes:
 *
 * - it lists every route the server registers. The routes are recorded here on their own,
 *   through Fastify's diagnostics channel, so that a route added later without schemas, or
 *   left out of the document, fails this file;
 * - it is a valid OpenAPI 3.1 document (checked against the specification's JSON Schema);
 * - every answer of a real server, on a socket, to good and bad requests is one it describes:
 *   the status is listed for that path and method, the media type is listed for that status,
 *   and the body is valid against the schema given there (Ajv, JSON Schema 2020-12). Every
 *   operation in it is exercised, with a 2xx at least.
 */

import diagnostics from 'node:diagnostics_channel';
import { readFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { Validator } from '@seriousme/openapi-schema-validator';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import type { FastifyInstance, RouteOptions } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import Fastify from 'fastify';
import type { Queue } from '../../src/queue/api.js';
import { createServer, type ServerOptions } from '../../src/server/index.js';
import { openApiDocument, recordRoutes } from '../../src/server/openapi.js';
import type { TickwheelServer } from '../../src/server/server.js';
import { useTempDirs } from '../support/temp-dir.js';

const tempDir = useTempDirs('openapi');

/* eslint-disable @typescript-eslint/no-explicit-any -- the document is read as plain JSON */
type Json = any;

const DOC_ID = 'https://tickwheel.invalid/openapi.json';

interface Answer {
  status: number;
  /** The media type, without parameters. */
  type: string;
  text: string;
  body: Json;
}

interface Call {
  params?: Record<string, string>;
  query?: string;
  /** Sent as JSON, with content-type: application/json. */
  body?: unknown;
  /** Sent as it is, with only the headers given. */
  raw?: string;
  headers?: Record<string, string>;
}

// ---- a real server, and the routes it registers ---------------------------------------------

const cleanups: Array<() => Promise<void>> = [];

afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** What Fastify was asked to register, as this file sees it: method, url and config. */
interface SeenRoute {
  method: string;
  url: string;
  config: Json;
  schema: Json;
}

/** Creates a server, recording the routes of every Fastify instance created meanwhile. */
async function startServer(
  options: ServerOptions,
): Promise<{ server: TickwheelServer; routes: SeenRoute[]; port: number }> {
  const seen: RouteOptions[] = [];
  const onInit = (message: unknown) => {
    const { fastify } = message as { fastify: FastifyInstance };
    fastify.addHook('onRoute', (route) => void seen.push(route));
  };
  diagnostics.subscribe('fastify.initialization', onInit);
  let server: TickwheelServer;
  try {
    server = await createServer({ logLevel: 'silent', ...options });
  } finally {
    diagnostics.unsubscribe('fastify.initialization', onInit);
  }
  cleanups.push(() => server.close());
  await server.listen({ port: 0, host: '127.0.0.1' });
  const { port } = server.server.address() as { port: number };
  // Read once the server is ready: later onRoute hooks may have replaced a route's schema.
  const routes = seen.flatMap((route) =>
    (Array.isArray(route.method) ? route.method : [route.method]).map((method) => ({
      method: method.toUpperCase(),
      url: route.url,
      config: route.config,
      schema: route.schema,
    })),
  );
  return { server, routes, port };
}

/** One request over a socket (node:http, which unlike fetch lets a test set Host). */
function send(port: number, method: string, path: string, call: Call): Promise<Answer> {
  const headers: Record<string, string> = { ...call.headers };
  let payload: string | undefined = call.raw;
  if (call.body !== undefined) {
    payload = JSON.stringify(call.body);
    headers['content-type'] ??= 'application/json';
  }
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: '127.0.0.1', port, method, path, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('error', reject);
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        const type = String(res.headers['content-type'] ?? '')
          .split(';')[0]
          .trim();
        let body: Json;
        try {
          body = JSON.parse(text);
        } catch {
          body = undefined;
        }
        resolve({ status: res.statusCode ?? 0, type, text, body });
      });
    });
    req.on('error', reject);
    req.end(payload);
  });
}

/** The status, media type and first bytes of a stream that does not end by itself. */
function firstBytes(port: number, path: string, body?: unknown): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const method = body === undefined ? 'GET' : 'POST';
    const headers = body === undefined ? {} : { 'content-type': 'application/json' };
    const req = httpRequest({ host: '127.0.0.1', port, method, path, headers }, (res) => {
      res.once('data', (chunk: Buffer) => {
        const type = String(res.headers['content-type'] ?? '')
          .split(';')[0]
          .trim();
        resolve({
          status: res.statusCode ?? 0,
          type,
          text: chunk.toString('utf8'),
          body: undefined,
        });
        req.destroy();
      });
      res.on('error', () => {});
    });
    req.on('error', reject);
    req.end(body === undefined ? undefined : JSON.stringify(body));
  });
}

// ---- the document --------------------------------------------------------------------------

function escapePointer(segment: string): string {
  return segment.replace(/~/g, '~0').replace(/\//g, '~1');
}

/** A Fastify url as an OpenAPI path, worked out here rather than taken from the server. */
function templateOf(url: string): string {
  return url
    .split('::')
    .map((part) => part.replace(/:([A-Za-z0-9_]+)/g, '{$1}'))
    .join(':');
}

/**
 * The routes the document must describe: all but Fastify's HEAD mirror of each GET (which
 * answers as the GET without a body) and those that opt out with config.openapi false.
 */
function describable(routes: readonly SeenRoute[]): SeenRoute[] {
  const gets = new Set(routes.filter((r) => r.method === 'GET').map((r) => r.url));
  return routes.filter(
    (route) => !(route.method === 'HEAD' && gets.has(route.url)) && route.config?.openapi !== false,
  );
}

/**
 * A server's own document, with what checks answers against it: each answer must have a status
 * the document lists for its path and method, and a body its schema accepts.
 */
class DescribedServer {
  /** `METHOD template status` of every answer checked. */
  readonly answered = new Set<string>();
  private readonly ajv = new Ajv2020({ strict: true, strictTypes: false, allErrors: true });
  private readonly validators = new Map<string, ValidateFunction>();

  constructor(
    readonly port: number,
    readonly doc: Json,
  ) {
    // The whole document, so that a schema's $refs (components/schemas) resolve within it;
    // Ajv compiles its root when resolving them, so its fields are made known keywords.
    this.ajv.addVocabulary(Object.keys(doc));
    this.ajv.addSchema(doc, DOC_ID, undefined, false);
  }

  static async of(port: number): Promise<DescribedServer> {
    const answer = await send(port, 'GET', '/openapi.json', {});
    expect(answer.status).toBe(200);
    expect(answer.type).toBe('application/json');
    const described = new DescribedServer(port, answer.body);
    described.check('GET', '/openapi.json', answer);
    return described;
  }

  /** Sends a request to the path `template` (`{name}` filled from `call.params`); checks the answer. */
  async call(method: string, template: string, call: Call = {}): Promise<Answer> {
    const path =
      template.replace(/\{([^}]+)\}/g, (_, name: string) =>
        encodeURIComponent(call.params?.[name] ?? ''),
      ) + (call.query === undefined ? '' : `?${call.query}`);
    const answer = await send(this.port, method, path, call);
    this.check(method, template, answer);
    return answer;
  }

  check(method: string, template: string, answer: Answer): void {
    const where = `${method} ${template}`;
    const op = this.doc.paths[template]?.[method.toLowerCase()];
    expect(op, `${where} is not in the document`).toBeDefined();
    const status = String(answer.status);
    const key = [status, `${status[0]}XX`, 'default'].find((k) => op.responses[k] !== undefined);
    expect(
      key,
      `${where} answered ${status} (${answer.text.slice(0, 200)}), which the document does ` +
        `not describe; it describes ${Object.keys(op.responses).join(', ')}`,
    ).toBeDefined();
    const content = op.responses[key as string].content ?? {};
    expect(Object.keys(content), `the media type of ${where} ${status}`).toContain(answer.type);
    const pointer =
      `/paths/${escapePointer(template)}/${method.toLowerCase()}/responses/${key}` +
      `/content/${escapePointer(answer.type)}/schema`;
    const validate = this.validator(pointer);
    const body =
      answer.type.endsWith('json') && !answer.type.endsWith('ndjson') ? answer.body : answer.text;
    expect(
      validate(body) ? null : validate.errors,
      `the body of ${where} ${status} against the document: ${answer.text.slice(0, 300)}`,
    ).toBeNull();
    this.answered.add(`${where} ${status}`);
  }

  private validator(pointer: string): ValidateFunction {
    let validate = this.validators.get(pointer);
    if (validate === undefined) {
      validate = this.ajv.compile({ $ref: `${DOC_ID}#${pointer}` });
      this.validators.set(pointer, validate);
    }
    return validate;
  }

  /** Every operation of the document, as `METHOD template`. */
  operations(): string[] {
    return Object.entries(this.doc.paths).flatMap(([path, item]) =>
      Object.keys(item as object).map((method) => `${method.toUpperCase()} ${path}`),
    );
  }
}

// ---- the tests -----------------------------------------------------------------------------

describe('GET /openapi.json', () => {
  it('is a valid OpenAPI 3.1 document: info, servers, tags, bearer scheme', async () => {
    const { port } = await startServer({ dir: tempDir(), fsync: 'never' });
    const { doc } = await DescribedServer.of(port);
    const result = await new Validator().validate(doc);
    expect(result.errors ?? null).toBeNull();
    expect(result.valid).toBe(true);
    expect(doc.openapi).toBe('3.1.0');
    expect(doc.info).toMatchObject({ title: 'tickwheel', version: expect.any(String) });
    const { version } = JSON.parse(
      readFileSync(new URL('../../package.json', import.meta.url), 'utf8'),
    ) as { version: string };
    expect(doc.info.version).toBe(version);
    expect(doc.servers).toEqual([{ url: '/' }]);
    expect(doc.components.securitySchemes.bearerAuth).toMatchObject({
      type: 'http',
      scheme: 'bearer',
    });
    const tags = doc.tags.map((tag: Json) => tag.name);
    for (const op of Object.values(doc.paths).flatMap((item) => Object.values(item as object))) {
      expect((op.tags ?? []).every((tag: string) => tags.includes(tag))).toBe(true);
    }
  });

  it('describes every route the server registers, with its inputs and answers', async () => {
    const { port, routes } = await startServer({ dir: tempDir(), fsync: 'never' });
    const { doc } = await DescribedServer.of(port);
    const left = routes.filter((route) => !describable(routes).includes(route));
    // The only routes left out on purpose: the page's build and its icon, not API.
    expect(left.filter((r) => r.method !== 'HEAD').map((r) => `${r.method} ${r.url}`)).toEqual([
      'GET /favicon.ico',
      'GET /assets/*',
    ]);
    const operationIds = new Set<string>();
    for (const route of describable(routes)) {
      const where = `${route.method} ${route.url}`;
      const op = doc.paths[templateOf(route.url)]?.[route.method.toLowerCase()];
      expect(op, `${where} is not in /openapi.json`).toBeDefined();
      // An answer the route sends when it works, described, with a schema.
      const ok = Object.keys(op.responses).filter((status) => status.startsWith('2'));
      expect(ok.length, `${where} describes no 2xx answer: give it a response schema`).toBe(1);
      expect(op.operationId, `${where} has no operationId`).toEqual(expect.any(String));
      expect(operationIds.has(op.operationId), `${where}: operationId used twice`).toBe(false);
      operationIds.add(op.operationId);
      expect(op.summary, `${where} has no summary`).toEqual(expect.any(String));
      expect(op.tags?.length, `${where} has no tag`).toBeGreaterThan(0);
      for (const [status, response] of Object.entries(op.responses) as Array<[string, Json]>) {
        expect(response.description, `${where} ${status}`).toEqual(expect.any(String));
        const media = Object.values(response.content ?? {}) as Json[];
        expect(media.length, `${where} ${status} has no content`).toBeGreaterThan(0);
        for (const { schema } of media) expect(schema, `${where} ${status}`).toBeDefined();
      }
      // Every path parameter, with the schema the route validates it with.
      for (const [, name] of route.url.replace(/::/g, '').matchAll(/:([A-Za-z0-9_]+)/g)) {
        const parameter = op.parameters?.find((p: Json) => p.in === 'path' && p.name === name);
        expect(parameter, `${where}: path parameter ${name}`).toMatchObject({ required: true });
        expect(route.schema?.params?.properties?.[name], `${where}: no schema for ${name}`).toEqual(
          expect.objectContaining({ type: 'string' }),
        );
        expect(parameter.schema).toMatchObject(route.schema.params.properties[name]);
      }
      if (route.schema?.body !== undefined) {
        expect(op.requestBody?.content?.['application/json']?.schema, where).toBeDefined();
      }
      // Errors are JSON `{ error: { code, message } }`; every route may fail with a 500.
      expect(op.responses['500'], `${where} 500`).toBeDefined();
    }
    // Nothing described that the server does not have.
    const registered = new Set(describable(routes).map((r) => `${r.method} ${templateOf(r.url)}`));
    const server = new DescribedServer(port, doc);
    expect(server.operations().filter((op) => !registered.has(op))).toEqual([]);
  });

  it("lists a /v1 route's token and 401 when the server has a token, and is served without one", async () => {
    const { port } = await startServer({ dir: tempDir(), fsync: 'never', token: 's3cret' });
    const server = await DescribedServer.of(port);
    for (const [path, item] of Object.entries(server.doc.paths) as Array<[string, Json]>) {
      for (const op of Object.values(item) as Json[]) {
        if (path.startsWith('/v1/')) {
          expect(op.security, path).toEqual([{ bearerAuth: [] }]);
          expect(op.responses['401'], path).toBeDefined();
        } else {
          expect(op.security, path).toBeUndefined();
          expect(op.responses['401'], path).toBeUndefined();
        }
        // With a token too, the server answers only Host names it knows.
        expect(op.responses['421'], path).toBeDefined();
      }
    }
    const refused = await server.call('GET', '/v1/stats');
    expect(refused.body.error.code).toBe('ERR_TICKWHEEL_UNAUTHORIZED');
    await server.call('GET', '/v1/stats', { headers: { authorization: 'Bearer nope' } });
    const stats = await server.call('GET', '/v1/stats', {
      headers: { authorization: 'Bearer s3cret' },
    });
    expect(stats.status).toBe(200);
    expect([...server.answered].sort()).toEqual([
      'GET /openapi.json 200',
      'GET /v1/stats 200',
      'GET /v1/stats 401',
    ]);
  });

  it('is served while the queue is still opening, when the other routes answer 503', async () => {
    const { port } = await startServer({
      queue: new Promise<Queue>(() => undefined),
      openInBackground: true,
    });
    const server = await DescribedServer.of(port);
    const health = await server.call('GET', '/healthz');
    expect(health).toMatchObject({ status: 503, body: { status: 'recovering' } });
    const stats = await server.call('GET', '/v1/stats');
    expect(stats).toMatchObject({
      status: 503,
      body: { error: { code: 'ERR_TICKWHEEL_RECOVERING' } },
    });
    await server.call('GET', '/metrics');
    await server.call('POST', '/v1/topics/{topic}/messages', {
      params: { topic: 't' },
      body: { payload: 1 },
    });
    expect([...server.answered].every((seen) => / (200|503)$/.test(seen))).toBe(true);
  });

  it('describes every answer of every route, good requests and bad', async () => {
    const { port } = await startServer({
      dir: tempDir(),
      fsync: 'never',
      queueOptions: { maxPayloadBytes: 2000 },
    });
    const server = await DescribedServer.of(port);
    const messages = '/v1/topics/{topic}/messages';
    const message = '/v1/messages/{id}';

    // Schedule: JSON and bytes; bad fields, a bad topic, too large, not JSON.
    let res = await server.call('POST', messages, {
      params: { topic: 'emails' },
      body: { payload: { to: 'a@b.c' }, delayMs: 3_600_000, id: 'later-1' },
    });
    expect(res.status).toBe(201);
    res = await server.call('POST', messages, {
      params: { topic: 'emails' },
      body: { payload: 'aGk=', payloadEncoding: 'base64', id: 'bytes-1', delayMs: 3_600_000 },
    });
    expect(res.status).toBe(201);
    res = await server.call('POST', messages, {
      params: { topic: 'emails' },
      body: { payload: 1, delay: 5 },
    });
    expect(res.status).toBe(400);
    res = await server.call('POST', messages, {
      params: { topic: 'no spaces' },
      body: { payload: 1 },
    });
    expect(res.status).toBe(400);
    res = await server.call('POST', messages, {
      params: { topic: 'emails' },
      body: { payload: 'x'.repeat(5000) },
    });
    expect(res).toMatchObject({
      status: 413,
      body: { error: { code: 'ERR_TICKWHEEL_PAYLOAD_TOO_LARGE' } },
    });
    res = await server.call('POST', messages, {
      params: { topic: 'emails' },
      raw: JSON.stringify({ payload: 'y'.repeat(1024 * 1024 + 64 * 1024) }),
      headers: { 'content-type': 'application/json' },
    });
    expect(res).toMatchObject({
      status: 413,
      body: { error: { code: 'ERR_TICKWHEEL_BODY_TOO_LARGE' } },
    });
    res = await server.call('POST', messages, {
      params: { topic: 'emails' },
      raw: 'payload=1',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
    });
    expect(res.status).toBe(415);
    res = await server.call('POST', messages, {
      params: { topic: 'emails' },
      raw: '{"payload":',
      headers: { 'content-type': 'application/json' },
    });
    expect(res.status).toBe(400);

    // A batch: scheduled; refused whole; partly refused by the queue (results tell which).
    const batch = '/v1/messages:batch';
    res = await server.call('POST', batch, {
      body: {
        messages: [
          { topic: 'emails', payload: 1, id: 'b-1', delayMs: 60_000 },
          { topic: 'sms', payload: 2, delayMs: 60_000 },
        ],
      },
    });
    expect(res.status).toBe(201);
    res = await server.call('POST', batch, { body: { messages: [] } });
    expect(res.status).toBe(400);
    res = await server.call('POST', batch, {
      body: {
        messages: [
          { topic: 'sms', payload: 1, delayMs: 60_000 },
          { topic: 'sms', payload: 'x'.repeat(5000) },
        ],
      },
    });
    expect(res.status).toBe(413);
    expect(res.body.results).toHaveLength(2);

    // Get: known, unknown, a bad id, an id over the router's 256 characters.
    res = await server.call('GET', message, { params: { id: 'later-1' } });
    expect(res.body).toMatchObject({ id: 'later-1', status: 'scheduled' });
    expect((await server.call('GET', message, { params: { id: 'nope' } })).status).toBe(404);
    expect((await server.call('GET', message, { params: { id: 'a b' } })).status).toBe(400);
    expect((await server.call('GET', message, { params: { id: 'x'.repeat(300) } })).status).toBe(
      414,
    );

    // Reschedule: done, unknown, a typo.
    res = await server.call('PATCH', message, {
      params: { id: 'later-1' },
      body: { delayMs: 7_200_000 },
    });
    expect(res.body).toMatchObject({ rescheduled: true });
    res = await server.call('PATCH', message, { params: { id: 'nope' }, body: { delayMs: 1 } });
    expect(res.status).toBe(404);
    res = await server.call('PATCH', message, { params: { id: 'later-1' }, body: { delay: 1 } });
    expect(res.status).toBe(400);

    // Receive two jobs (one with a single attempt), nothing from an empty topic, a bad max.
    const receive = '/v1/topics/{topic}/receive';
    for (const [id, maxAttempts] of [
      ['job-1', 1],
      ['job-2', 5],
    ] as const) {
      res = await server.call('POST', messages, {
        params: { topic: 'jobs' },
        body: { payload: { id }, id, maxAttempts },
      });
      expect(res.status).toBe(201);
    }
    const received: Json[] = [];
    for (let i = 0; i < 50 && received.length < 2; i++) {
      res = await server.call('POST', receive, {
        params: { topic: 'jobs' },
        body: { max: 10, waitMs: 200 },
      });
      received.push(...res.body.messages);
    }
    expect(received.map((m) => m.id).sort()).toEqual(['job-1', 'job-2']);
    const receiptOf = (id: string) => received.find((m) => m.id === id).receipt as string;
    res = await server.call('POST', receive, { params: { topic: 'empty' }, body: {} });
    expect(res.body).toEqual({ messages: [] });
    res = await server.call('POST', receive, { params: { topic: 'jobs' }, body: { max: 0 } });
    expect(res.status).toBe(400);
    res = await server.call('POST', receive, { params: { topic: 'jobs' } });
    expect(res.status).toBe(415);

    // In flight: no rescheduling.
    res = await server.call('PATCH', message, { params: { id: 'job-2' }, body: { delayMs: 1 } });
    expect(res.status).toBe(409);

    // Ack one (and a stale receipt), nack the other into the dead letters.
    res = await server.call('POST', '/v1/ack', {
      body: { receipts: [receiptOf('job-2'), 'stale~x'] },
    });
    expect(res.body).toEqual({ acked: 1, results: [true, false] });
    expect((await server.call('POST', '/v1/ack', { body: { receipts: [] } })).status).toBe(400);
    res = await server.call('POST', '/v1/nack', {
      body: { receipts: [receiptOf('job-1')], reason: 'boom' },
    });
    expect(res.body).toEqual({ nacked: 1, results: [true] });
    expect((await server.call('POST', '/v1/nack', { body: {} })).status).toBe(400);

    // Browsing a topic's pending messages; a bad query, and one only the queue refuses.
    const listPath = '/v1/topics/{topic}/messages';
    res = await server.call('GET', listPath, { params: { topic: 'emails' }, query: 'limit=1' });
    expect(res.body).toEqual({
      messages: [expect.objectContaining({ topic: 'emails', status: 'scheduled' })],
      cursor: expect.any(String),
    });
    res = await server.call('GET', listPath, { params: { topic: 'jobs' }, query: 'limit=0' });
    expect(res.status).toBe(400);
    res = await server.call('GET', listPath, {
      params: { topic: 'jobs' },
      query: 'from=5&until=4',
    });
    expect(res.status).toBe(400);

    // Dead letters, a preview of one, requeue it; the ones that cannot be requeued.
    const dead = '/v1/topics/{topic}/dead';
    res = await server.call('GET', dead, { params: { topic: 'jobs' }, query: 'limit=10' });
    expect(res.body.messages).toEqual([
      expect.objectContaining({ id: 'job-1', status: 'dead', lastError: 'boom' }),
    ]);
    res = await server.call('GET', dead, { params: { topic: 'jobs' }, query: 'limit=0' });
    expect(res.status).toBe(400);
    const preview = '/v1/messages/{id}/preview';
    res = await server.call('GET', preview, { params: { id: 'job-1' } });
    expect(res.body).toEqual({ preview: '{"id":"job-1"}', truncated: false });
    expect((await server.call('GET', preview, { params: { id: 'nope' } })).status).toBe(404);
    const requeue = '/v1/messages/{id}/requeue';
    res = await server.call('POST', requeue, { params: { id: 'job-1' }, body: {} });
    expect(res.body).toEqual({ requeued: true });
    res = await server.call('POST', requeue, { params: { id: 'later-1' }, body: {} });
    expect(res.status).toBe(409);
    res = await server.call('POST', requeue, { params: { id: 'nope' }, body: { delayMs: -1 } });
    expect(res.status).toBe(400);
    res = await server.call('POST', requeue, { params: { id: 'nope' }, body: {} });
    expect(res.status).toBe(404);

    // Cancel, and cancel again.
    res = await server.call('DELETE', message, { params: { id: 'later-1' } });
    expect(res.body).toEqual({ cancelled: true });
    expect((await server.call('DELETE', message, { params: { id: 'later-1' } })).status).toBe(404);

    // Topics: settings and counts.
    const topicPath = '/v1/topics/{topic}';
    res = await server.call('POST', `${topicPath}/pause`, { params: { topic: 'jobs' }, body: {} });
    expect(res.body).toMatchObject({ topic: 'jobs', paused: true });
    res = await server.call('POST', `${topicPath}/resume`, { params: { topic: 'jobs' }, body: {} });
    expect(res.body.paused).toBe(false);
    res = await server.call('PATCH', topicPath, {
      params: { topic: 'jobs' },
      body: { rateLimit: { perSecond: 1000 } },
    });
    expect(res.body.rateLimit).toEqual({ perSecond: 1000, burst: 1000 });
    res = await server.call('PATCH', topicPath, {
      params: { topic: 'jobs' },
      body: { rateLimit: { perSecond: 0 } },
    });
    expect(res.status).toBe(400);
    res = await server.call('PATCH', topicPath, {
      params: { topic: 'jobs' },
      body: { rateLimit: null },
    });
    expect(res.body.rateLimit).toBeNull();
    res = await server.call('GET', topicPath, { params: { topic: 'jobs' } });
    expect(res.body).toMatchObject({ topic: 'jobs', paused: false });
    res = await server.call('GET', '/v1/topics');
    expect(res.body.topics.map((t: { topic: string }) => t.topic)).toContain('jobs');
    // Recurring schedules.
    const schedulePath = '/v1/schedules/{name}';
    res = await server.call('PUT', schedulePath, {
      params: { name: 'nightly' },
      body: { topic: 'jobs', cron: '30 2 * * *', timezone: 'Europe/Berlin', payload: { n: 1 } },
    });
    expect(res.body).toMatchObject({ name: 'nightly', created: 1 });
    res = await server.call('PUT', schedulePath, {
      params: { name: 'nightly' },
      body: { topic: 'jobs', cron: '99 * * * *' },
    });
    expect(res.status).toBe(400);
    res = await server.call('PATCH', schedulePath, {
      params: { name: 'nightly' },
      body: { everyMs: 60_000 },
    });
    expect(res.body).toMatchObject({ everyMs: 60_000, cron: null });
    res = await server.call('PATCH', schedulePath, {
      params: { name: 'none' },
      body: { paused: true },
    });
    expect(res.status).toBe(404);
    res = await server.call('GET', schedulePath, { params: { name: 'nightly' } });
    expect(res.body.lastAt).toEqual(expect.any(Number));
    expect((await server.call('GET', schedulePath, { params: { name: 'none' } })).status).toBe(404);
    res = await server.call('GET', '/v1/schedules');
    expect(res.body.schedules).toHaveLength(1);
    res = await server.call('DELETE', schedulePath, { params: { name: 'nightly' } });
    expect(res.body).toEqual({ deleted: true });
    expect(
      (await server.call('DELETE', schedulePath, { params: { name: 'nightly' } })).status,
    ).toBe(404);

    // Events: a stream that never ends on its own; its headers and first bytes are checked.
    server.check('GET', '/v1/events', await firstBytes(server.port, '/v1/events?topic=jobs'));
    res = await server.call('GET', '/v1/events', { query: 'types=nope' });
    expect(res.status).toBe(400);
    // The delivery stream likewise (its first line is written before anything is ready).
    const stream = '/v1/topics/{topic}/stream';
    const opened = await firstBytes(server.port, '/v1/topics/none/stream', { window: 10 });
    expect(opened.text).toBe('{"messages":[]}\n');
    server.check('POST', stream, opened);
    res = await server.call('POST', stream, { params: { topic: 'none' }, body: { window: 0 } });
    expect(res.status).toBe(400);

    // The operator routes and the dashboard's.
    res = await server.call('GET', '/v1/stats');
    expect(res.body).toMatchObject({
      scheduled: expect.any(Number),
      server: { maxWaitMs: 20_000 },
    });
    res = await server.call('GET', '/v1/dashboard');
    expect(res.body.topics.jobs).toMatchObject({ ready: expect.any(Number) });
    expect((await server.call('GET', '/healthz')).body).toEqual({ status: 'ok' });
    expect((await server.call('GET', '/metrics')).text).toContain('tickwheel_messages_acked_total');
    expect((await server.call('GET', '/')).type).toBe('text/html');
    await server.call('GET', '/openapi.json');
    // Without a token, a Host name the server does not answer to.
    res = await server.call('GET', '/healthz', { headers: { host: 'rebound.example' } });
    expect(res.status).toBe(421);

    // Every operation was exercised, and seen working.
    const worked = new Set(
      [...server.answered]
        .filter((seen) => / 2\d\d$/.test(seen))
        .map((seen) => seen.replace(/ \d+$/, '')),
    );
    expect(server.operations().filter((op) => !worked.has(op))).toEqual([]);
  });
});

describe('openApiDocument', () => {
  it('describes path, query and body by shared $ref, and refuses draft-07-only keywords', async () => {
    const app = Fastify();
    const routes = recordRoutes(app);
    app.addSchema({ $id: 'Settings', type: 'object', properties: { rate: { type: 'number' } } });
    app.post(
      '/v1/things/:name::rename',
      {
        schema: {
          params: { type: 'object', properties: { name: { type: 'string', maxLength: 8 } } },
          querystring: {
            type: 'object',
            required: ['dry'],
            properties: { dry: { type: 'string' } },
          },
          body: { $ref: 'Settings#' },
          response: { 200: { $ref: 'Settings#' } },
        },
      },
      async () => null,
    );
    app.get(
      '/v1/legacy',
      { schema: { response: { 200: { type: 'number', nullable: true } } } },
      async () => null,
    );
    await app.ready();
    expect(() => openApiDocument(routes, '1.2.3')).toThrow(/keyword nullable/);
    const described = routes.filter(({ route }) => route.url !== '/v1/legacy');
    const doc = openApiDocument(described, '1.2.3') as Json;
    await app.close();
    expect((await new Validator().validate(doc)).errors ?? null).toBeNull();
    const op = doc.paths['/v1/things/{name}:rename'].post;
    expect(op.parameters).toEqual([
      { name: 'name', in: 'path', required: true, schema: { type: 'string', maxLength: 8 } },
      { name: 'dry', in: 'query', required: true, schema: { type: 'string' } },
    ]);
    expect(op.requestBody).toEqual({
      required: false,
      content: { 'application/json': { schema: { $ref: '#/components/schemas/Settings' } } },
    });
    expect(doc.components.schemas.Settings).toEqual({
      type: 'object',
      properties: { rate: { type: 'number' } },
    });
  });
});
