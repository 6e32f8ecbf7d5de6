/**
 * The error catalogue (src/errors.ts): every error class tickwheel has is a TickwheelError with
 * a code from the catalogue, keeps its name, and keeps TypeError / RangeError as its base where
 * it had one; instanceof on each subclass is the ordinary check.
 */

import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { setTimeout as nodeSleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { TickwheelAssertionError } from '../src/assert.js';
import { CliError } from '../src/cli/io.js';
import { InvalidArgumentError, UsageError } from '../src/cli/args.js';
import { TickwheelHttpError, TickwheelNetworkError } from '../src/client/index.js';
import {
  AbortError,
  LeaseLostError,
  ManualClock,
  TickwheelCorruptError,
  TickwheelError,
  TickwheelRangeError,
  TickwheelStateError,
  TickwheelTypeError,
  TickwheelUnavailableError,
  TimeoutError,
  TimerWheel,
} from '../src/index.js';
import { isErrorCode, TickwheelDependencyError, TickwheelOutcomeError } from '../src/errors.js';
import { HttpError } from '../src/server/errors.js';
import { LogError } from '../src/store/log/index.js';
import { PushSignatureError } from '../src/protocol/push-signature.js';
import { PushError } from '../src/queue/push-sender.js';
import { SnapshotRejected } from '../src/store/file/snapshot.js';
import { IdempotentRollbackError } from '../src/idempotent/index.js';
import { PushNotAllowedError } from '../src/queue/push-guard.js';
import { LockLostError } from '../src/store/file/lock.js';
import { TickwheelNoReplicaError } from '../src/cluster/durability.js';

const SRC = join(import.meta.dirname, '../src');

const errors: Array<[string, Error, ErrorConstructor]> = [
  ['TickwheelTypeError', new TickwheelTypeError('ERR_TICKWHEEL_INVALID_DELAY', 'm'), TypeError],
  ['TickwheelRangeError', new TickwheelRangeError('ERR_TICKWHEEL_INVALID_DELAY', 'm'), RangeError],
  ['TickwheelStateError', new TickwheelStateError('ERR_TICKWHEEL_CLOSED', 'm'), Error],
  ['TickwheelCorruptError', new TickwheelCorruptError('m'), Error],
  ['TickwheelDependencyError', new TickwheelDependencyError('m', ['fastify'], 'npm i'), Error],
  [
    'TickwheelOutcomeError',
    new TickwheelOutcomeError('ERR_TICKWHEEL_IO', 'm', { id: 'a', retry: true }),
    Error,
  ],
  ['AbortError', new AbortError(), Error],
  ['TimeoutError', new TimeoutError('m', 5), Error],
  ['LeaseLostError', new LeaseLostError('m'), Error],
  ['LogError', new LogError('ERR_TICKWHEEL_INVALID_POSITION', 'm'), Error],
  ['TickwheelUnavailableError', new TickwheelUnavailableError('ERR_TICKWHEEL_IO', 'm'), Error],
  ['SnapshotRejected', new SnapshotRejected('why'), Error],
  ['HttpError', new HttpError(404, 'ERR_TICKWHEEL_NOT_FOUND', 'm'), Error],
  ['TickwheelHttpError', new TickwheelHttpError(409, 'ERR_TICKWHEEL_CONFLICT', 'm', {}), Error],
  ['TickwheelNetworkError', new TickwheelNetworkError('ERR_TICKWHEEL_NETWORK', 'm', null), Error],
  ['CliError', new CliError('m'), Error],
  ['UsageError', new UsageError('m'), Error],
  ['InvalidArgumentError', new InvalidArgumentError('m'), Error],
  ['TickwheelAssertionError', new TickwheelAssertionError('m'), Error],
  ['PushError', new PushError('m'), Error],
  ['PushSignatureError', new PushSignatureError('m'), Error],
  ['IdempotentRollbackError', new IdempotentRollbackError('t/m'), Error],
  ['PushNotAllowedError', new PushNotAllowedError('h', '10.0.0.1', 'private'), Error],
  ['LockLostError', new LockLostError('/data', 'was deleted'), Error],
  ['TickwheelNoReplicaError', new TickwheelNoReplicaError('replicated', ['127.0.0.1:6379']), Error],
];

const sourceFiles = readdirSync(SRC, { recursive: true, encoding: 'utf8' })
  .filter((file) => file.endsWith('.ts'))
  .map((file) => join(SRC, file));

describe('every error class', () => {
  it.each(errors)('%s is a TickwheelError with a code of the catalogue', (name, error, base) => {
    expect(error.name).toBe(name);
    expect(error).toBeInstanceOf(TickwheelError);
    expect(error).toBeInstanceOf(base);
    expect(isErrorCode((error as TickwheelError).code)).toBe(true);
  });

  it('is one of the classes above, for each class in src/ named like an error', () => {
    const declared: string[] = [];
    for (const file of sourceFiles) {
      for (const match of readFileSync(file, 'utf8').matchAll(
        /^(?:export )?(?:abstract )?class (\w+)(?:<[^{]*>)?\s+extends (\w+)/gm,
      )) {
        const [, name, base] = match as unknown as [string, string, string];
        if (/Error$|Rejected$/.test(name) || /Error$/.test(base)) {
          declared.push(`${relative(SRC, file)}: ${name}`);
        }
      }
    }
    const tested = new Set(['TickwheelError', ...errors.map(([name]) => name)]);
    expect(declared.filter((entry) => !tested.has(entry.split(': ')[1] as string))).toEqual([]);
    expect(declared.length).toBe(tested.size);
  });
});

describe('instanceof', () => {
  it('is the ordinary check on every subclass', () => {
    expect(new LogError('ERR_TICKWHEEL_INVALID_POSITION', 'm')).not.toBeInstanceOf(HttpError);
    expect(new TickwheelTypeError('ERR_TICKWHEEL_INVALID_DELAY', 'm')).not.toBeInstanceOf(
      TickwheelStateError,
    );
    expect(new TickwheelStateError('ERR_TICKWHEEL_CLOSED', 'm')).not.toBeInstanceOf(TypeError);
    expect(new UsageError('m')).toBeInstanceOf(CliError);
    expect(new CliError('m')).not.toBeInstanceOf(UsageError);
  });

  it('is false for errors that are not tickwheel errors, even with a tickwheel code', () => {
    for (const value of [
      new Error('m'),
      new TypeError('m'),
      Object.assign(new Error('m'), { code: 'ERR_TICKWHEEL_IO' }),
      { code: 'ERR_TICKWHEEL_IO' },
      null,
      undefined,
      'ERR_TICKWHEEL_IO',
    ]) {
      expect(value instanceof TickwheelError).toBe(false);
    }
  });

  it('holds for errors the timers throw', () => {
    const timers = new TimerWheel({ clock: new ManualClock() });
    expect(() => timers.setTimeout(() => {}, Number.NaN)).toThrow(TickwheelError);
    timers.close();
    expect(() => timers.sleep(10)).toThrow(TickwheelError);
  });
});

describe('AbortError', () => {
  it("has the name and code of Node's own", async () => {
    const controller = new AbortController();
    controller.abort();
    const node = await nodeSleep(10, undefined, { signal: controller.signal }).catch(
      (err: unknown) => err as { name: string; code: string },
    );
    const ours = new AbortError(controller.signal.reason);
    expect({ name: ours.name, code: ours.code }).toEqual({ name: node?.name, code: node?.code });
    expect(ours.cause).toBe(controller.signal.reason);
  });
});

/** Each code of the store and the servers it stands on, with the one class that carries it. */
const CLASS_OF_CODE: Readonly<Record<string, string>> = {
  ERR_TICKWHEEL_CORRUPT: 'TickwheelCorruptError',
  ERR_TICKWHEEL_IO: 'TickwheelUnavailableError',
  ERR_TICKWHEEL_LOCKED: 'TickwheelUnavailableError',
  ERR_TICKWHEEL_LOCK_LOST: 'TickwheelUnavailableError',
  ERR_TICKWHEEL_UNAVAILABLE: 'TickwheelUnavailableError',
  ERR_TICKWHEEL_NOT_DURABLE: 'TickwheelUnavailableError',
  ERR_TICKWHEEL_DATA_LOST: 'TickwheelUnavailableError',
};

/** `throw new Error(`, `reject(new RangeError(`, ...: an error without a code. */
const PLAIN = /(?:throw|reject\()\s*new (Error|TypeError|RangeError)\(/g;
/** `new SomeError('ERR_TICKWHEEL_...'`: a class given a code. */
const CODED = /new (\w+)\(\s*'(ERR_TICKWHEEL_\w+)'/g;

describe('every error src/ throws', () => {
  const sources = sourceFiles.map((file) => ({
    name: relative(SRC, file).split('\\').join('/'),
    text: readFileSync(file, 'utf8'),
  }));

  /** Every finding of `pattern` in src/, as "file: what" (`what` made from the match). */
  function findings(pattern: RegExp, what: (match: RegExpMatchArray) => string): string[] {
    const found = new Set<string>();
    for (const { name, text } of sources) {
      for (const match of text.matchAll(pattern)) found.add(`${name}: ${what(match)}`);
    }
    return [...found].sort();
  }

  it('has a code: none is a plain Error, TypeError or RangeError', () => {
    const plain = findings(PLAIN, (match) => `throw new ${match[1]}`);
    expect(plain).toEqual([]);
  });

  it('has the one class of its kind: corrupt data, or the disk or a server failing', () => {
    const misplaced = findings(CODED, (match) => `${match[1]} ${match[2]}`).filter((found) => {
      const [, klass, code] = /: (\w+) (\w+)$/.exec(found) as unknown as [string, string, string];
      return code in CLASS_OF_CODE && CLASS_OF_CODE[code] !== klass;
    });
    expect(misplaced).toEqual([]);
  });
});
