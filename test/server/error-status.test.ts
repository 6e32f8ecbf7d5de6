/**
 * The status of every error code comes from one table, src/errors.ts, typed over the
 * whole catalogue (a code without a status does not compile). These tests hold the server to
 * it: every code in the table answers its status, every code written anywhere in src/ is in the
 * table, and real requests that fail answer the status of the code they carry.
 */

import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { HTTP_STATUS, isErrorCode, type TickwheelErrorCode } from '../../src/errors.js';
import { FAULT_ONLY_CODES } from '../../src/queue/faults.js';
import { toErrorResponse } from '../../src/server/errors.js';
import { openServer } from './harness.js';

const SRC = join(import.meta.dirname, '../../src');

const sourceFiles = readdirSync(SRC, { recursive: true, encoding: 'utf8' })
  .filter((file) => file.endsWith('.ts'))
  .map((file) => join(SRC, file));

describe('the status table', () => {
  it.each(Object.entries(HTTP_STATUS))('%s answers %i', (code, status) => {
    const { statusCode, body } = toErrorResponse(Object.assign(new Error('boom'), { code }));
    expect(statusCode).toBe(status);
    // 500 marks a code the server never raises: a bug, told apart from nothing else.
    expect(body.error.code).toBe(status === 500 ? 'ERR_TICKWHEEL_INTERNAL' : code);
  });

  it('lists every code written in src/, so none of them is answered with a 500 by accident', () => {
    const written = new Set<string>();
    for (const file of sourceFiles) {
      for (const match of readFileSync(file, 'utf8').matchAll(
        /'(ERR_TICKWHEEL_[A-Z_]+|ABORT_ERR)'/g,
      )) {
        written.add(match[1] as string);
      }
    }
    expect(written.size).toBeGreaterThan(40);
    // A fault's own codes (src/queue/faults.ts) are logged, never answered.
    const answered = [...written].filter((code) => !Object.hasOwn(FAULT_ONLY_CODES, code));
    expect(answered.filter((code) => !isErrorCode(code))).toEqual([]);
  });

  it('keeps 4xx for what the caller can change and 5xx for the server', () => {
    const status = (code: TickwheelErrorCode) => HTTP_STATUS[code];
    expect(status('ERR_TICKWHEEL_INVALID_MESSAGE')).toBe(400);
    expect(status('ERR_TICKWHEEL_RECORD_TOO_LARGE')).toBe(413);
    expect(status('ERR_TICKWHEEL_IO')).toBe(503);
    expect(status('ERR_TICKWHEEL_CORRUPT')).toBe(503);
    expect(status('ERR_TICKWHEEL_INTERNAL')).toBe(500);
  });

  it('does not take properties every object has for codes', () => {
    for (const code of ['constructor', 'toString', '__proto__', 'hasOwnProperty']) {
      expect(isErrorCode(code)).toBe(false);
      expect(toErrorResponse(Object.assign(new Error('boom'), { code })).statusCode).toBe(500);
    }
  });
});

describe('a running server', () => {
  it('answers each failed request with the status of its code', async () => {
    const { call, queue } = await openServer(
      { bodyLimit: 2048, token: 'secret' },
      { maxPayloadBytes: 100 },
    );
    const auth = { authorization: 'Bearer secret' };
    await queue.schedule({ topic: 't', id: 'pending', payload: 1, delayMs: 60_000 });
    const requests: Array<[string, string, unknown, Record<string, string>, TickwheelErrorCode]> = [
      ['GET', '/v1/messages/pending', undefined, {}, 'ERR_TICKWHEEL_UNAUTHORIZED'],
      ['GET', '/v1/messages/nothing', undefined, auth, 'ERR_TICKWHEEL_NOT_FOUND'],
      ['GET', '/v1/nowhere', undefined, auth, 'ERR_TICKWHEEL_NOT_FOUND'],
      ['POST', '/v1/messages/pending/requeue', {}, auth, 'ERR_TICKWHEEL_CONFLICT'],
      [
        'POST',
        '/v1/topics/t/messages',
        { payload: 1, delay: 5 },
        auth,
        'ERR_TICKWHEEL_INVALID_REQUEST',
      ],
      [
        'POST',
        '/v1/topics/t/messages',
        { payload: 'x'.repeat(200) },
        auth,
        'ERR_TICKWHEEL_PAYLOAD_TOO_LARGE',
      ],
      [
        'POST',
        '/v1/topics/t/messages',
        { payload: 'x'.repeat(4096) },
        auth,
        'ERR_TICKWHEEL_BODY_TOO_LARGE',
      ],
      [
        'POST',
        '/v1/topics/t/messages',
        'text',
        { ...auth, 'content-type': 'text/plain' },
        'ERR_TICKWHEEL_UNSUPPORTED_MEDIA_TYPE',
      ],
    ];
    for (const [method, url, body, headers, code] of requests) {
      const res = await call(method, url, body, headers);
      expect(res.body?.error?.code, `${method} ${url}: ${res.text}`).toBe(code);
      expect(res.status, `${method} ${url}`).toBe(HTTP_STATUS[code]);
    }
  });

  it('answers a Host it does not serve (no token) with the status of HOST_NOT_ALLOWED', async () => {
    const { call } = await openServer();
    const res = await call('GET', '/v1/stats', undefined, { host: 'rebound.example' });
    expect(res.body.error.code).toBe('ERR_TICKWHEEL_HOST_NOT_ALLOWED');
    expect(res.status).toBe(HTTP_STATUS.ERR_TICKWHEEL_HOST_NOT_ALLOWED);
  });

  it('answers a queue error with the status of its code', async () => {
    const { call, queue } = await openServer();
    await queue.close();
    const res = await call('POST', '/v1/topics/t/messages', { payload: 1 });
    expect(res.body.error.code).toBe('ERR_TICKWHEEL_CLOSED');
    expect(res.status).toBe(HTTP_STATUS.ERR_TICKWHEEL_CLOSED);
  });
});
