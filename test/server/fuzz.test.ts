import { connect } from 'node:net';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { openServer, type TestServer } from './harness.js';

/**
 * Random and malformed requests at every route: the server must answer each with a status
 * below 500 (JSON error bodies for 4xx), never crash, and go on serving normal requests.
 */

const METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'HEAD', 'OPTIONS'] as const;

/** Ids and receipts seen in answers, so later requests can refer to live messages. */
const seen = { ids: ['m-1', 'm-2', 'm-3'], receipts: ['stale~receipt'] };

function pick<T>(pool: T[], index: number): T {
  return pool[index % pool.length];
}

const weird = fc.constantFrom(
  '..',
  '.',
  '%2e%2e',
  '%2F',
  'a%2Fb',
  '%00',
  '%zz',
  '%',
  '~',
  '::',
  '%C0%AE',
  'x'.repeat(129),
  'y'.repeat(201),
  'z'.repeat(300),
);

const topicSegment = fc.oneof(
  { weight: 6, arbitrary: fc.constantFrom('t', 'u', 'a.b:c-d_e') },
  { weight: 1, arbitrary: weird },
  { weight: 1, arbitrary: fc.string({ maxLength: 40 }).map(encodeURIComponent) },
);

/** An id segment: resolved when the request is made, so it can name a message that exists. */
const idSegment = fc.oneof(
  { weight: 6, arbitrary: fc.nat().map((i) => () => pick(seen.ids, i)) },
  { weight: 1, arbitrary: weird.map((w) => () => w) },
  {
    weight: 1,
    arbitrary: fc.string({ maxLength: 40 }).map((text) => () => encodeURIComponent(text)),
  },
);

const number = fc.oneof(
  fc.integer(),
  fc.double(),
  fc.constantFrom(0, -0, 1e308, -1e308, 2 ** 53, 1e21, 0.5, -1),
);

const anything: fc.Arbitrary<unknown> = fc.oneof(
  number,
  fc.string({ maxLength: 30 }),
  fc.boolean(),
  fc.constant(null),
  fc.jsonValue({ maxDepth: 3 }),
  fc.array(fc.oneof(fc.string({ maxLength: 8 }), number), { maxLength: 5 }),
);

type Lazy = () => unknown;
/** [method, path, body] of one request; path and body are made when it is sent. */
type Request = [method: string, path: () => string, body: Lazy | undefined];

/** Plausible values of each field (mostly valid, so requests get past validation), or anything. */
const FIELD_VALUES: Record<string, fc.Arbitrary<unknown>> = {
  payload: fc.jsonValue({ maxDepth: 2 }),
  payloadEncoding: fc.constantFrom('json', 'json', 'json', 'base64'),
  delayMs: fc.integer({ min: -5, max: 30 }),
  deliverAt: fc.integer({ min: -5, max: 30 }).map((d) => Date.now() + d),
  id: fc.nat().map((i) => pick(seen.ids, i)),
  maxAttempts: fc.integer({ min: 1, max: 3 }),
  backoff: fc.record({ type: fc.constantFrom('fixed', 'exponential'), delayMs: fc.nat(10) }),
  max: fc.integer({ min: 1, max: 5 }),
  waitMs: fc.integer({ min: 0, max: 10 }),
  visibilityMs: fc.integer({ min: 1, max: 30 }),
};

function fields(names: string[], required: string[] = []): fc.Arbitrary<Lazy> {
  const shape = Object.fromEntries(
    names.map((name) => {
      const plausible = name === 'receipts' ? receiptList : (FIELD_VALUES[name] ?? anything);
      const present = fc.oneof(
        { weight: 9, arbitrary: plausible },
        { weight: 1, arbitrary: anything },
      );
      const absent = fc.constant(undefined);
      return [
        name,
        required.includes(name)
          ? present
          : fc.oneof({ weight: 2, arbitrary: absent }, { weight: 1, arbitrary: present }),
      ];
    }),
  );
  return fc
    .tuple(
      fc.record(shape),
      // Now and then a property no route knows.
      fc.oneof(
        { weight: 9, arbitrary: fc.constant(null) },
        { weight: 1, arbitrary: fc.tuple(fc.string({ maxLength: 8 }), anything) },
      ),
    )
    .map(([record, extra]) => () => {
      const body: Record<string, unknown> = {};
      for (const [key, v] of Object.entries(record)) {
        if (v !== undefined) body[key] = typeof v === 'function' ? v() : v;
      }
      if (extra !== null) body[extra[0]] = extra[1];
      return body;
    });
}

/** Receipts from earlier receives, mixed with made-up ones. */
const receiptList: fc.Arbitrary<Lazy> = fc
  .array(
    fc.oneof(
      fc.nat().map((i) => ({ i })),
      fc.string({ maxLength: 20 }),
    ),
    {
      minLength: 1,
      maxLength: 8,
    },
  )
  .map(
    (items) => () =>
      items.map((item) => (typeof item === 'string' ? item : pick(seen.receipts, item.i))),
  );

const MESSAGE_FIELDS = [
  'payload',
  'payloadEncoding',
  'delayMs',
  'deliverAt',
  'id',
  'maxAttempts',
  'backoff',
];

const batch = fc
  .array(
    fc.tuple(
      fc.constantFrom('t', 't', 't', 'u', 'u', 'u', '../t', ''),
      fields(MESSAGE_FIELDS, ['payload']),
    ),
    {
      minLength: 1,
      maxLength: 12,
    },
  )
  .map((items) => () => ({
    messages: items.map(([topic, make]) => ({ topic, ...(make() as object) })),
  }));

/** [method, path, body] of each route, with arbitraries for the parts. */
const endpoint: fc.Arbitrary<Request> = fc.oneof<fc.Arbitrary<Request>[]>(
  fc
    .tuple(fc.constant('POST'), topicSegment, fields(MESSAGE_FIELDS, ['payload']))
    .map(([m, t, b]): Request => [m, () => `/v1/topics/${t}/messages`, b]),
  fc.tuple(fc.constant('POST'), batch).map(([m, b]): Request => [m, () => '/v1/messages:batch', b]),
  fc
    .tuple(fc.constantFrom('GET', 'DELETE'), idSegment)
    .map(([m, id]): Request => [m, () => `/v1/messages/${id()}`, undefined]),
  fc
    .tuple(fc.constant('PATCH'), idSegment, fields(['delayMs', 'deliverAt']))
    .map(([m, id, b]): Request => [m, () => `/v1/messages/${id()}`, b]),
  fc
    .tuple(fc.constant('POST'), idSegment, fields(['delayMs']))
    .map(([m, id, b]): Request => [m, () => `/v1/messages/${id()}/requeue`, b]),
  fc
    .tuple(fc.constant('POST'), topicSegment, fields(['max', 'waitMs', 'visibilityMs']))
    .map(([m, t, b]): Request => [m, () => `/v1/topics/${t}/receive`, b]),
  fc
    .tuple(fc.constantFrom('/v1/ack', '/v1/nack'), fields(['receipts', 'delayMs'], ['receipts']))
    .map(([url, b]): Request => ['POST', () => url, b]),
  fc
    .tuple(
      topicSegment,
      fc.constantFrom('', '?limit=5', '?limit=0', '?limit=x', '?limit=1&limit=2', '?x=%zz'),
    )
    .map(([t, q]): Request => ['GET', () => `/v1/topics/${t}/dead${q}`, undefined]),
  fc
    .constantFrom('/v1/stats', '/healthz', '/metrics', '/')
    .map((url): Request => ['GET', () => url, undefined]),
);

/** Anything at all: any method, any path, any body. */
const chaos: fc.Arbitrary<Request> = fc
  .tuple(
    fc.constantFrom(...METHODS),
    fc.oneof(
      fc
        .array(fc.oneof(topicSegment, weird, fc.constantFrom('v1', 'topics', 'messages')), {
          maxLength: 6,
        })
        .map((p) => `/${p.join('/')}`),
      fc.constantFrom(
        '/v1',
        '/v1/',
        '//v1/stats',
        '/v1//stats',
        '/V1/stats',
        '/v1/stats/',
        '/v1/messages:batch/x',
      ),
    ),
    fc.option(anything),
  )
  .map(([method, url, body]): Request => [
    method,
    () => url,
    body === null ? undefined : () => body,
  ]);

const rawBody = fc.oneof(
  fc.string({ maxLength: 200 }),
  fc.uint8Array({ maxLength: 200 }).map((bytes) => Buffer.from(bytes).toString('latin1')),
  fc.constantFrom(
    '{"payload":1,"__proto__":{"x":1}}',
    '{"payload":{"constructor":{"prototype":{"x":1}}}}',
    '{"payload": 1} trailing',
    '\u0000',
    '[]',
    'null',
    '"str"',
  ),
  fc.nat({ max: 40_000 }).map((n) => `{"payload":"${'x'.repeat(n)}"}`),
);

/** How the body goes out: as JSON, cut short, or replaced by raw text. */
const encoding = fc.oneof(
  { weight: 6, arbitrary: fc.constant({ kind: 'json' as const }) },
  { weight: 1, arbitrary: fc.nat().map((cut) => ({ kind: 'cut' as const, cut })) },
  { weight: 1, arbitrary: rawBody.map((text) => ({ kind: 'raw' as const, text })) },
);

const printable = fc.stringMatching(/^[\x20-\x7e]{0,60}$/);

const headers = fc.record(
  {
    'content-type': fc.oneof(
      { weight: 8, arbitrary: fc.constant('application/json') },
      {
        weight: 2,
        arbitrary: fc.constantFrom(
          'application/json; charset=utf-8',
          'application/JSON',
          'text/plain',
          'application/octet-stream',
          'multipart/form-data; boundary=x',
          'application/x-www-form-urlencoded',
          'application/json; charset=latin1',
          '*/*',
          '',
        ),
      },
      { weight: 1, arbitrary: printable },
    ),
    authorization: fc.oneof(fc.constantFrom('Bearer ', 'Bearer x', 'bearer'), printable),
    accept: fc.constantFrom('application/json', 'text/html', '*/*', 'nonsense'),
    'content-encoding': fc.constantFrom('gzip', 'identity', 'br', 'x'),
    'x-forwarded-for': printable,
  },
  { requiredKeys: [] },
);

/** Keeps ids and receipts from answers for later requests. */
function remember(text: string): void {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    return;
  }
  const found = body as { id?: unknown; messages?: Array<{ id?: unknown; receipt?: unknown }> };
  if (typeof found.id === 'string') seen.ids.push(found.id);
  for (const message of Array.isArray(found.messages) ? found.messages : []) {
    if (typeof message.receipt === 'string') seen.receipts.push(message.receipt);
  }
  if (seen.ids.length > 200) seen.ids.splice(3, 100);
  if (seen.receipts.length > 200) seen.receipts.splice(1, 100);
}

async function expectServes(server: TestServer): Promise<void> {
  expect((await server.call('GET', '/healthz')).status).toBe(200);
  const scheduled = await server.call('POST', '/v1/topics/after-fuzz/messages', { payload: 'ok' });
  expect(scheduled.status).toBe(201);
  const received = await server.call('POST', '/v1/topics/after-fuzz/receive', { waitMs: 1000 });
  expect(received.body.messages).toHaveLength(1);
  const acked = await server.call('POST', '/v1/ack', {
    receipts: [received.body.messages[0].receipt],
  });
  expect(acked.body.acked).toBe(1);
}

describe('fuzz', () => {
  it('answers random requests at every route with < 500, JSON errors, and keeps serving', async () => {
    const server = await openServer(
      { maxWaitMs: 5, bodyLimit: 32 * 1024 },
      { maxPayloadBytes: 20_000 },
    );
    const statuses = new Map<number, number>();
    await fc.assert(
      fc.asyncProperty(
        fc.oneof({ weight: 5, arbitrary: endpoint }, { weight: 1, arbitrary: chaos }),
        encoding,
        fc.oneof({ weight: 4, arbitrary: fc.constant({}) }, { weight: 1, arbitrary: headers }),
        async ([method, url, makeBody], how, head) => {
          const value = makeBody?.();
          let payload: string | undefined;
          if (value !== undefined) {
            const json = JSON.stringify(value);
            payload =
              how.kind === 'json'
                ? json
                : how.kind === 'cut'
                  ? json.slice(0, how.cut % (json.length + 1))
                  : how.text;
          }
          const target = url();
          const res = await server.server.inject({
            method: method as 'GET',
            url: target,
            headers: {
              ...(payload === undefined ? {} : { 'content-type': 'application/json' }),
              ...head,
            },
            ...(payload === undefined || method === 'GET' || method === 'HEAD' ? {} : { payload }),
          });
          statuses.set(res.statusCode, (statuses.get(res.statusCode) ?? 0) + 1);
          expect(res.statusCode, `${method} ${target}: ${res.body}`).toBeLessThan(500);
          if (res.statusCode >= 400 && method !== 'HEAD') {
            const parsed = JSON.parse(res.body);
            expect(parsed.error.code).toMatch(/^ERR_TICKWHEEL_/);
            expect(typeof parsed.error.message).toBe('string');
          }
          if (res.statusCode < 300 && method !== 'HEAD') remember(res.body);
        },
      ),
      { numRuns: 2000 },
    );
    // The generators reach past validation: messages get scheduled, received and acked.
    expect(statuses.get(201) ?? 0).toBeGreaterThan(30);
    expect(statuses.get(200) ?? 0).toBeGreaterThan(100);
    expect((await server.queue.stats()).acked).toBeGreaterThan(0);
    await expectServes(server);
  });

  it('refuses deeply nested payloads with a 4xx', async () => {
    const server = await openServer();
    const depth = 200_000;
    const nested = `{"payload":${'['.repeat(depth)}${']'.repeat(depth)}}`;
    const res = await server.call('POST', '/v1/topics/t/messages', nested, {
      'content-type': 'application/json',
    });
    expect(res.status).toBeGreaterThanOrEqual(400);
    expect(res.status).toBeLessThan(500);
    const poisoned = `{"payload":${'['.repeat(50_000)}{"__proto__":1}${']'.repeat(50_000)}}`;
    const res2 = await server.call('POST', '/v1/topics/t/messages', poisoned, {
      'content-type': 'application/json',
    });
    expect(res2.status).toBeLessThan(500);
    await expectServes(server);
  });

  it('survives malformed HTTP on a real socket', async () => {
    const server = await openServer({ maxWaitMs: 5 });
    await server.server.listen({ port: 0, host: '127.0.0.1' });
    const { port } = server.server.server.address() as { port: number };
    const send = (raw: string) =>
      new Promise<string>((resolve) => {
        const socket = connect(port, '127.0.0.1');
        let answer = '';
        socket.setEncoding('latin1');
        socket.on('data', (chunk: string) => (answer += chunk));
        socket.on('error', () => resolve(answer));
        socket.on('close', () => resolve(answer));
        socket.setTimeout(2000, () => socket.destroy());
        socket.end(raw, 'latin1');
      });
    // Well-formed requests, then damaged: cut short, a byte changed, headers that contradict.
    const request = fc
      .tuple(
        fc.constantFrom(
          ['POST', '/v1/topics/t/messages', '{"payload":{"a":1},"delayMs":0}'],
          ['POST', '/v1/messages:batch', '{"messages":[{"topic":"t","payload":1}]}'],
          ['POST', '/v1/topics/t/receive', '{"max":2}'],
          ['GET', '/v1/stats', ''],
          ['GET', '/v1/topics/%2e%2e/dead', ''],
          ['GET', '/v1/messages/..%2f..%2fetc%2fpasswd', ''],
          ['DELETE', '/v1/messages/m-1', ''],
        ),
        fc.array(
          fc.constantFrom(
            'Content-Length: -1',
            'Content-Length: 99999999999999999999',
            'Transfer-Encoding: chunked',
            'Transfer-Encoding: gzip, chunked',
            'Content-Length: 3',
            'X: y\rZ: w',
            `Big: ${'a'.repeat(20_000)}`,
            'Expect: 100-continue',
            'Content-Type: text/plain',
            'Host:',
          ),
          { maxLength: 2 },
        ),
      )
      .map(([[method, url, body], extra]) =>
        [
          `${method} ${url} HTTP/1.1`,
          'Host: localhost',
          'Connection: close',
          ...(body === ''
            ? []
            : ['Content-Type: application/json', `Content-Length: ${body.length}`]),
          ...extra,
          '',
          body,
        ].join('\r\n'),
      );
    const damage = fc.oneof(
      fc.constant((raw: string) => raw),
      fc.nat().map((at) => (raw: string) => raw.slice(0, at % (raw.length + 1))),
      fc.tuple(fc.nat(), fc.integer({ min: 0, max: 255 })).map(([at, byte]) => (raw: string) => {
        const i = at % raw.length;
        return raw.slice(0, i) + String.fromCharCode(byte) + raw.slice(i + 1);
      }),
      printable.map((text) => () => text),
    );
    const statuses = new Map<string, number>();
    await fc.assert(
      fc.asyncProperty(request, damage, async (raw, hurt) => {
        const answer = await send(hurt(raw));
        const status = /^HTTP\/1\.[01] (\d{3})/.exec(answer)?.[1] ?? 'none';
        statuses.set(status, (statuses.get(status) ?? 0) + 1);
        if (status !== 'none') expect(Number(status), answer.slice(0, 300)).toBeLessThan(500);
      }),
      { numRuns: 300 },
    );
    expect(statuses.get('201') ?? 0).toBeGreaterThan(0);
    expect(statuses.get('400') ?? 0).toBeGreaterThan(0);
    const res = await fetch(`http://127.0.0.1:${port}/healthz`);
    expect(res.status).toBe(200);
    await expectServes(server);
  });
});
