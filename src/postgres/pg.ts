/**
 * `pg` (node-postgres), an optional peer dependency: loaded on first use, so that users without
 * PostgreSQL never load it, and reported with the command that installs it when missing. The
 * shapes below are the little of it the driver uses; a `pg.Pool` of the user's fits them.
 */

import {
  TickwheelDependencyError,
  TickwheelStateError,
  TickwheelUnavailableError,
} from '../errors.js';

export const PG_PEER = { name: 'pg', range: '^8.11.0' } as const;

export interface PgResult {
  rows: Array<Record<string, unknown>>;
}

/** A connection, or a pool (each query on a connection of its own). */
export interface PgSession {
  query(text: string, values?: unknown[]): Promise<PgResult>;
}

export interface PgClient extends PgSession {
  release(err?: Error | boolean): void;
  /** pg's clients emit 'error' when their connection is lost, a query running or not. */
  on?(event: 'error', listener: (err: Error) => void): unknown;
  off?(event: 'error', listener: (err: Error) => void): unknown;
}

export interface PgPool extends PgSession {
  connect(): Promise<PgClient>;
  end(): Promise<void>;
  on(event: 'error', listener: (err: Error) => void): unknown;
}

/** A connection of its own (LISTEN), outside any pool. */
export interface PgListenClient extends PgSession {
  connect(): Promise<void>;
  end(): Promise<void>;
  on(event: 'notification', listener: (m: { channel: string; payload?: string }) => void): unknown;
  on(event: 'error' | 'end', listener: (err?: Error) => void): unknown;
}

export interface PgModule {
  Pool: new (config: Record<string, unknown>) => PgPool;
  Client: new (config: Record<string, unknown>) => PgListenClient;
}

let loaded: Promise<PgModule> | undefined;

export function loadPg(): Promise<PgModule> {
  loaded ??= pgFrom(import(PG_PEER.name)).catch((err: unknown) => {
    loaded = undefined;
    throw err;
  });
  return loaded;
}

/** The module an import of pg resolves to; a failed import is the missing peer, named. */
export async function pgFrom(importing: Promise<unknown>): Promise<PgModule> {
  let module: { default?: PgModule } & PgModule;
  try {
    module = (await importing) as { default?: PgModule } & PgModule;
  } catch (cause) {
    const install = `npm install ${PG_PEER.name}@8`;
    const err = new TickwheelDependencyError(
      `a queue on PostgreSQL needs ${PG_PEER.name}, an optional peer dependency of tickwheel ` +
        `that is not installed: run \`${install}\``,
      [PG_PEER.name],
      install,
    );
    err.cause = cause;
    throw err;
  }
  return module.default ?? module;
}

/** What pg-pool answers, without a code, to a query once the pool was ended. */
const POOL_ENDED = /^Cannot use a pool after calling end on the pool/;

/** What pg answers when the connection asks for TLS and the server offers none. */
const NO_TLS = /^The server does not support SSL connections/;

/**
 * Node's codes for a server certificate that the connection does not trust. Not one that is not
 * valid yet: a clock a little behind, or a certificate made a moment ago, heals by waiting.
 */
const UNTRUSTED_CERTIFICATE =
  /^(DEPTH_ZERO_SELF_SIGNED_CERT|SELF_SIGNED_CERT_IN_CHAIN|UNABLE_TO_VERIFY_LEAF_SIGNATURE|UNABLE_TO_GET_ISSUER_CERT(_LOCALLY)?|CERT_HAS_EXPIRED|CERT_REVOKED|CERT_SIGNATURE_FAILURE|CERT_UNTRUSTED|INVALID_CA|ERR_TLS_CERT_ALTNAME_INVALID)$/;

/** SQLSTATE classes of a server or a connection that is not there, or not now. */
const UNAVAILABLE = /^(08|53|57|58|40P01|40001|55P03)/;

/**
 * An error of a call as a named one: the server or the connection not there (or a statement
 * that ran out of time) is ERR_TICKWHEEL_UNAVAILABLE; a call the schema refused (SQLSTATE 22023,
 * raised by sql/*.sql) or anything else PostgreSQL answered is ERR_TICKWHEEL_INVALID_STATE, as
 * are a pool of the application's that was ended, TLS asked of a server without it, and a server
 * certificate not trusted.
 */
export function named(err: unknown, what: string): Error {
  if (err instanceof TickwheelStateError || err instanceof TickwheelUnavailableError) return err;
  const code = (err as { code?: unknown } | null)?.code;
  const message = err instanceof Error ? err.message : String(err);
  if (POOL_ENDED.test(message)) {
    return new TickwheelStateError(
      'ERR_TICKWHEEL_INVALID_STATE',
      `${what} cannot run: the pg.Pool the queue was opened with was ended (pool.end()), and ` +
        'stays so: close the queue before ending its pool',
      { cause: err },
    );
  }
  // TLS asked of a server without it, or a certificate not trusted: waiting cures neither.
  if (NO_TLS.test(message)) {
    return new TickwheelStateError(
      'ERR_TICKWHEEL_INVALID_STATE',
      `PostgreSQL could not take ${what}: the connection asks for TLS (sslmode in the ` +
        'connection string, or ssl of the pg.Pool) and the server does not offer it (pg does ' +
        'not fall back to a plain connection, not even for sslmode=prefer). Set sslmode=disable, ' +
        'or turn ssl on in the server',
      { cause: err },
    );
  }
  if (typeof code === 'string' && UNTRUSTED_CERTIFICATE.test(code)) {
    return new TickwheelStateError(
      'ERR_TICKWHEEL_INVALID_STATE',
      `PostgreSQL could not take ${what}: the server's certificate is not trusted (${message}, ` +
        `${code}). Give its CA (sslrootcert= in the connection string, or ssl: { ca } on a ` +
        'pg.Pool), or fix the certificate',
      { cause: err },
    );
  }
  if (typeof code === 'string' && !UNAVAILABLE.test(code) && /^[0-9A-Z]{5}$/.test(code)) {
    return new TickwheelStateError(
      'ERR_TICKWHEEL_INVALID_STATE',
      `PostgreSQL refused ${what}: ${message} (SQLSTATE ${code})`,
      { cause: err },
    );
  }
  // Class 53: the server answered, short of disk, memory or connections (heals once freed).
  const short = typeof code === 'string' && code.startsWith('53');
  return new TickwheelUnavailableError(
    'ERR_TICKWHEEL_UNAVAILABLE',
    short
      ? `PostgreSQL lacked the resources for ${what} (disk, memory or connections): ${message} (SQLSTATE ${code})`
      : `PostgreSQL did not answer ${what}: ${message}`,
    { cause: err },
  );
}
