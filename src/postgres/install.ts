/**
 * A queue's schema on PostgreSQL (sql/*.sql): its tables and the functions every call runs.
 * The files name the schema `@Q@` (a quoted identifier), `@S@` (its name as a literal) and a few
 * constants; they are filled in here and run in one transaction, under an advisory lock that
 * makes two nodes opening the same queue take turns, and only when the stored version is not
 * SCHEMA_VERSION or a function of the files is missing. Every statement may run again (IF NOT
 * EXISTS, CREATE OR REPLACE).
 */

import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

import { TickwheelStateError } from '../errors.js';
import { WINDOW_LEVEL_STRIDE } from '../partitioned/driver.js';
import type { PgSession } from './pg.js';

/** Bumped whenever a file of sql/ changes. */
export const SCHEMA_VERSION = 22;

/** tables first: the functions' types are its tables' rows; then each file after those it uses. */
const FILES = 'tables records segments states leases messages loading deliveries recurring';

/** What the files' placeholders stand for, apart from the schema's names. */
const CONSTANTS = {
  // Windows per table of records at the first level: with the default 30 s windows, a table
  // per 64 minutes, for windows up to SPAN_FANOUT tables ahead (8.5 hours); each level after
  // holds SPAN_FANOUT times as many windows a table, and reaches SPAN_FANOUT times as far.
  WINDOW_SPAN: '128',
  SPAN_FANOUT: '8',
  // The segment of window w at level k is k * LEVEL_STRIDE + w.
  LEVEL_STRIDE: String(WINDOW_LEVEL_STRIDE),
  // Near segments per table (numbered for the whole queue).
  NEAR_SPAN: '64',
  // Finished ids remembered per partition for get().
  DONE_KEPT: '256',
  // A near note longer than this is sent as 'n' alone (NOTIFY's payload is under 8,000 bytes).
  NOTE_BYTES: '7900',
} as const;

/**
 * The schema of a queue: `tickwheel_<queue>`; a name too long for an identifier (63 bytes) is
 * cut, with a hash of the whole that keeps two queues apart.
 */
export function schemaOf(queue: string): string {
  const whole = `tickwheel_${queue}`;
  if (whole.length <= 63) return whole;
  let hash = 0x811c9dc5;
  for (let i = 0; i < queue.length; i++) hash = Math.imul(hash ^ queue.charCodeAt(i), 0x01000193);
  return `${whole.slice(0, 54)}_${(hash >>> 0).toString(16).padStart(8, '0')}`;
}

export function quoteIdent(name: string): string {
  return `"${name.replace(/"/g, '""')}"`;
}

export function quoteLiteral(text: string): string {
  return `'${text.replace(/'/g, "''")}'`;
}

/** The SQL that makes a queue's schema, files joined in order. */
export function schemaSql(
  schema: string,
  channel: string,
  constants: Partial<Record<keyof typeof CONSTANTS, string>> = {},
): string {
  const values: Record<string, string> = {
    ...CONSTANTS,
    ...constants,
    Q: quoteIdent(schema),
    S: quoteLiteral(schema),
    CHANNEL: quoteLiteral(channel),
  };
  return files()
    .map((text) => text.replace(/@([A-Z_]+)@/g, (whole, key: string) => values[key] ?? whole))
    .join('\n');
}

/** The files' text in order, placeholders unfilled. */
function files(): string[] {
  return FILES.split(' ').map((name) => {
    const file = new URL(`./sql/${name}.sql`, import.meta.url);
    try {
      return readFileSync(file, 'utf8');
    } catch (cause) {
      const message = `the PostgreSQL schema file ${fileURLToPath(file)} cannot be read: reinstall tickwheel`;
      throw new TickwheelStateError('ERR_TICKWHEEL_FORMAT', message, { cause });
    }
  });
}

/** The names the files make in the schema with `CREATE <kind> @Q@.<name>`. */
function madeNames(kind: RegExp): Set<string> {
  const made = new RegExp(`CREATE ${kind.source} @Q@\\.([a-z_0-9]+)`, 'g');
  return new Set(files().flatMap((text) => [...text.matchAll(made)].map((m) => m[1])));
}

/**
 * What the files make that the schema lacks: a schema at SCHEMA_VERSION, so made whole, that
 * an operator changed by hand. Functions hold nothing and are made again; a table or a
 * sequence held the queue's messages or counts, and one made again empty would hide that.
 */
async function missing(session: PgSession, schema: string) {
  const found = await session.query(
    `SELECT (SELECT coalesce(array_agg(proname::text), '{}') FROM pg_proc
              WHERE pronamespace = to_regnamespace($1)) AS functions,
            (SELECT coalesce(array_agg(relname::text), '{}') FROM pg_class
              WHERE relnamespace = to_regnamespace($1)) AS relations`,
    [quoteIdent(schema)],
  );
  const functions = new Set(found.rows[0]?.functions as string[]);
  const relations = new Set(found.rows[0]?.relations as string[]);
  const absent = (names: Set<string>, present: Set<string>) =>
    [...names].filter((name) => !present.has(name)).sort();
  return {
    functions: absent(madeNames(/OR REPLACE FUNCTION/), functions),
    relations: absent(madeNames(/(?:TABLE|SEQUENCE) IF NOT EXISTS/), relations),
  };
}

/** Makes or brings up to date a queue's schema; the queue's name is kept to tell two apart. */
export async function install(
  session: PgSession,
  queue: string,
  schema: string,
  channel: string,
  constants: Parameters<typeof schemaSql>[2] = {},
): Promise<void> {
  await session.query('BEGIN');
  try {
    await session.query('SELECT pg_advisory_xact_lock(hashtextextended($1, 0))', [
      `tickwheel.install.${schema}`,
    ]);
    const found = await session.query(`SELECT to_regclass($1) IS NOT NULL AS made`, [
      `${quoteIdent(schema)}.config`,
    ]);
    let stored: { version?: string; queue?: string } = {};
    if (found.rows[0]?.made === true) {
      const rows = await session.query(
        `SELECT key, value FROM ${quoteIdent(schema)}.config WHERE key IN ('version', 'queue')`,
      );
      stored = Object.fromEntries(rows.rows.map((row) => [row.key, row.value]));
    }
    if (stored.queue !== undefined && stored.queue !== queue) {
      throw new TickwheelStateError(
        'ERR_TICKWHEEL_INVALID_STATE',
        `PostgreSQL schema ${schema} holds queue ${JSON.stringify(stored.queue)}, not ` +
          `${JSON.stringify(queue)}: rename one of the queues`,
      );
    }
    if (Number(stored.version) > SCHEMA_VERSION) {
      throw new TickwheelStateError(
        'ERR_TICKWHEEL_INVALID_STATE',
        `PostgreSQL schema ${schema} was made by a newer tickwheel (schema version ` +
          `${stored.version}, this one knows ${SCHEMA_VERSION}): upgrade this node`,
      );
    }
    let repair = false;
    if (stored.version === String(SCHEMA_VERSION)) {
      const lacks = await missing(session, schema);
      if (lacks.relations.length > 0) {
        throw new TickwheelStateError(
          'ERR_TICKWHEEL_INVALID_STATE',
          `PostgreSQL schema ${schema} of queue ${JSON.stringify(queue)} lacks ` +
            `${lacks.relations.join(', ')}, made with it and dropped since: what they held is ` +
            `gone; restore the schema from a backup, or drop it (DROP SCHEMA ${quoteIdent(schema)} ` +
            'CASCADE) to start the queue empty',
        );
      }
      repair = lacks.functions.length > 0;
    }
    if (stored.version !== String(SCHEMA_VERSION) || repair) {
      await session.query(`CREATE SCHEMA IF NOT EXISTS ${quoteIdent(schema)}`);
      await session.query(schemaSql(schema, channel, constants));
      await session.query(
        `INSERT INTO ${quoteIdent(schema)}.config (key, value) VALUES ('version', $1), ('queue', $2)
         ON CONFLICT (key) DO UPDATE SET value = excluded.value`,
        [String(SCHEMA_VERSION), queue],
      );
    }
    await session.query('COMMIT');
  } catch (err) {
    await session.query('ROLLBACK').catch(() => undefined);
    throw err;
  }
}
