/**
 * What the server answers when the store fails: never a 500 for an error the store can throw
 * (a 503 for disk trouble and damaged data, a 4xx for what the caller can change), and for a
 * message whose record is damaged on disk, a 503 with ERR_TICKWHEEL_CORRUPT on every route
 * that reads it.
 */

import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { DelayQueue } from '../../src/delay-queue.js';
import { createServer } from '../../src/server/index.js';
import {
  HTTP_STATUS,
  TickwheelCorruptError,
  TickwheelUnavailableError,
  type UnavailableErrorCode,
} from '../../src/errors.js';
import { toErrorResponse } from '../../src/server/errors.js';
import type { LogFailure } from '../../src/store/log/index.js';
import { RECORD_HEADER_BYTES } from '../../src/store/log/index.js';
import { injector } from './harness.js';
import { useTempDirs } from '../support/temp-dir.js';

const tempDir = useTempDirs('store-errors');

const closers: Array<() => Promise<void>> = [];
afterEach(async () => {
  await Promise.all(closers.splice(0).map((close) => close()));
});

describe('status of every error the store can throw', () => {
  const codes: Record<LogFailure['code'] | 'ERR_TICKWHEEL_FORMAT', number> = {
    ERR_TICKWHEEL_IO: 503,
    ERR_TICKWHEEL_CORRUPT: 503,
    ERR_TICKWHEEL_RECORD_TOO_LARGE: 413,
    ERR_TICKWHEEL_CLOSED: 503,
    ERR_TICKWHEEL_INVALID_OPTION: 400,
    ERR_TICKWHEEL_INVALID_RECORD: 503,
    ERR_TICKWHEEL_INVALID_POSITION: 503,
    ERR_TICKWHEEL_SEGMENT_ACTIVE: 503,
    ERR_TICKWHEEL_INVALID_STATE: 503,
    ERR_TICKWHEEL_FORMAT: 503,
    ERR_TICKWHEEL_LOCKED: 423,
    ERR_TICKWHEEL_LOCK_LOST: 503,
    ERR_TICKWHEEL_UNAVAILABLE: 503,
    ERR_TICKWHEEL_NOT_DURABLE: 503,
    ERR_TICKWHEEL_DATA_LOST: 503,
  };
  it.each(Object.entries(codes))('%s: %i', (code, status) => {
    const { statusCode, body } = toErrorResponse(Object.assign(new Error('boom'), { code }));
    expect(statusCode).toBe(status);
    expect(body.error.code).toBe(code);
  });
});

describe("the classes of the store's failures", () => {
  const unavailable: UnavailableErrorCode[] = [
    'ERR_TICKWHEEL_IO',
    'ERR_TICKWHEEL_LOCKED',
    'ERR_TICKWHEEL_LOCK_LOST',
    'ERR_TICKWHEEL_UNAVAILABLE',
    'ERR_TICKWHEEL_NOT_DURABLE',
    'ERR_TICKWHEEL_DATA_LOST',
  ];
  it.each(unavailable)('TickwheelUnavailableError %s answers the status of its code', (code) => {
    const { statusCode, body } = toErrorResponse(new TickwheelUnavailableError(code, 'm'));
    expect(statusCode).toBe(HTTP_STATUS[code]);
    expect(body.error.code).toBe(code);
  });

  it('TickwheelCorruptError answers 503 ERR_TICKWHEEL_CORRUPT, saying to repair', () => {
    const { statusCode, body } = toErrorResponse(new TickwheelCorruptError('m'));
    expect(statusCode).toBe(503);
    expect(body.error).toMatchObject({ code: 'ERR_TICKWHEEL_CORRUPT' });
    expect(body.error.message).toContain('tickwheel repair');
  });
});

describe('a message whose record is damaged on disk', () => {
  it('answers 503 ERR_TICKWHEEL_CORRUPT on get, cancel, reschedule and preview; the others work', async () => {
    const dir = tempDir();
    const writer = await DelayQueue.open({ dir, fsync: 'never' });
    for (const id of ['a', 'b', 'c']) {
      await writer.schedule({ topic: 't', id, payload: { id }, delayMs: 3_600_000 });
    }
    await writer.close(); // writes a snapshot: the next open reads none of the log
    const file = join(dir, 'log', '0000000001.seg');
    const bytes = readFileSync(file);
    const second = RECORD_HEADER_BYTES + bytes.readUInt32LE(2);
    bytes[second + RECORD_HEADER_BYTES + bytes.readUInt32LE(second + 2) - 2] ^= 0xff; // b's payload
    writeFileSync(file, bytes);

    const queue = await DelayQueue.open({ dir, fsync: 'never' });
    const server = await createServer({ queue, logLevel: 'silent' });
    closers.push(async () => {
      await server.close();
      await queue.close();
    });
    const call = injector(server);
    for (const [method, url, body] of [
      ['GET', '/v1/messages/b', undefined],
      ['DELETE', '/v1/messages/b', undefined],
      ['PATCH', '/v1/messages/b', { delayMs: 1000 }],
      ['GET', '/v1/messages/b/preview', undefined],
    ] as const) {
      const res = await call(method, url, body);
      expect(res.status, `${method} ${url}: ${res.text}`).toBe(503);
      expect(res.body.error.code).toBe('ERR_TICKWHEEL_CORRUPT');
      expect(res.body.error.message).toMatch(/tickwheel repair/);
    }
    expect((await call('GET', '/v1/messages/a')).status).toBe(200);
    expect((await call('GET', '/v1/messages/c')).status).toBe(200);
  });
});
