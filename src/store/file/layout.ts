/**
 * The file store's data directory:
 *
 *   LOCK               pid of the owning process (see lock.ts)
 *   format.json        { format }: the on-disk format; other formats are refused at open
 *   log/*.seg          the message log: every change of every message, appended (../log/)
 *   index/*.idx        the schedule index, files of 2^L windows (index-files.ts)
 *   checkpoint.json    { indexedUntil, frontier, windows, log }: index entries of all records
 *                      before indexedUntil that were due at or after frontier are on disk,
 *                      in index files of (at least) the sizes listed in windows; and the log's
 *                      durable extent (checkpoint.ts)
 *   snapshot.bin       the tables (table.ts) as of one log position (snapshot.ts), so recovery
 *                      replays only the log after it
 *   repair.json        what repairs of a damaged log dropped, and the damaged stretches they
 *                      accepted as lost (present only after a repair; repair.ts)
 *   topics.json        { version, topics: { <topic>: { paused, rateLimit } } }: topics whose
 *                      settings are not the defaults (src/queue/topics.ts; absent until one is)
 *
 * The log is the truth; everything else can be rebuilt from it (the index, the snapshot) or
 * says how much of it to trust (the checkpoint, repair.json). Each small file is replaced whole
 * (written beside, fsynced, renamed), so a crash leaves the old file or the new one, never a mix.
 *
 * This module owns the names, the directory's creation, the format check, and the reading and
 * writing of format.json, repair.json and topics.json.
 */

import { mkdir, open, readFile, readdir, rename, stat } from 'node:fs/promises';
import { join } from 'node:path';
import {
  TickwheelCorruptError,
  TickwheelStateError,
  TickwheelTypeError,
  TickwheelUnavailableError,
  type StoreDamage,
} from '../../errors.js';
import { DATA_DIRECTORY_MODE, DATA_FILE_MODE, describeCause, syncDirectory } from '../log/index.js';
import type { RepairReport } from '../../queue/store.js';
import { checkTopic } from '../../queue/message.js';
import {
  DEFAULT_TOPIC_SETTINGS,
  parseStoredPush,
  parseStoredSettings,
  type TopicSettings,
} from '../../queue/topics.js';

/** The on-disk format this code writes and reads (format.json). 1: records without topics. */
export const STORE_FORMAT = 2;

export const LOG_DIR = 'log';
export const INDEX_DIR = 'index';
export const CHECKPOINT_FILE = 'checkpoint.json';
export const REPAIR_FILE = 'repair.json';
const TOPICS_FILE = 'topics.json';
/** Push targets (with their secrets), apart from the other settings. */
const PUSH_FILE = 'push.json';
const FORMAT_FILE = 'format.json';

/**
 * Creates the data directory (and its parents) if it is not there. A path that names a file, or
 * runs through one, is a bad `dir` (ERR_TICKWHEEL_INVALID_OPTION); any other failure (no
 * permission, a read-only or full disk) is ERR_TICKWHEEL_IO. Both keep the system's error as
 * their cause.
 */
export async function makeDataDirectory(dir: string): Promise<void> {
  try {
    await mkdir(dir, { recursive: true, mode: DATA_DIRECTORY_MODE });
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'EEXIST' || code === 'ENOTDIR') {
      throw new TickwheelTypeError(
        'ERR_TICKWHEEL_INVALID_OPTION',
        `dir must be a directory: ${dir} ${code === 'EEXIST' ? 'exists and is not one' : 'runs through a file'} (${describeCause(err)})`,
        { cause: err },
      );
    }
    throw new TickwheelUnavailableError(
      'ERR_TICKWHEEL_IO',
      `cannot create the data directory ${dir}: ${describeCause(err)}`,
      { cause: err },
    );
  }
}

/**
 * Refuses a directory written in another on-disk format, and records the format in a new one.
 * A directory without format.json but with log records is of no format this code knows: its
 * records would be misread.
 */
export async function checkFormat(dir: string): Promise<void> {
  const file = join(dir, FORMAT_FILE);
  let text: string | undefined;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  if (text !== undefined) {
    let format: unknown;
    try {
      format = (JSON.parse(text) as { format?: unknown }).format;
    } catch {
      format = undefined;
    }
    if (format === STORE_FORMAT) return;
    throw formatError(dir, `format ${String(format)}`);
  }
  if (await hasRecords(join(dir, LOG_DIR))) throw formatError(dir, 'format 1');
  await replaceFile(file, JSON.stringify({ format: STORE_FORMAT }));
}

async function hasRecords(logDir: string): Promise<boolean> {
  let names: string[];
  try {
    names = await readdir(logDir);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return false;
    throw err;
  }
  for (const name of names) {
    if (/^\d{10}\.seg$/.test(name) && (await stat(join(logDir, name))).size > 0) return true;
  }
  return false;
}

function formatError(dir: string, found: string): TickwheelStateError {
  return new TickwheelStateError(
    'ERR_TICKWHEEL_FORMAT',
    `${dir} holds data in on-disk ${found}; this version of tickwheel reads and writes format ` +
      `${STORE_FORMAT} only. Drain it with the version that wrote it, or start from an empty ` +
      'directory',
  );
}

/** What repairs accepted as lost, and their reports, oldest first (repair.json). */
export interface Repairs {
  accepted: StoreDamage[];
  reports: RepairReport[];
}

export async function readRepairs(dir: string): Promise<Repairs> {
  let text: string;
  try {
    text = await readFile(join(dir, REPAIR_FILE), 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { accepted: [], reports: [] };
    throw err;
  }
  try {
    const { accepted, reports } = JSON.parse(text) as Partial<Repairs>;
    if (Array.isArray(accepted) && Array.isArray(reports)) return { accepted, reports };
  } catch {
    // An unreadable file accepts nothing: the damage is refused again, and can be repaired again.
  }
  return { accepted: [], reports: [] };
}

export async function writeRepairs(dir: string, repairs: Repairs): Promise<void> {
  await replaceFile(
    join(dir, REPAIR_FILE),
    `${JSON.stringify({ version: 1, ...repairs }, null, 1)}\n`,
  );
  await syncDirectory(dir);
}

/**
 * Topics' settings (topics.json, and push targets in push.json). A file that cannot be read is refused with
 * ERR_TICKWHEEL_CORRUPT rather than read as "nothing paused": a paused topic must not start
 * delivering because of a damaged file. It is replaced whole on each change, so only damage from
 * outside makes it unreadable; the error says how to recover.
 */
export async function readTopicSettings(dir: string): Promise<Map<string, TopicSettings>> {
  const settings = new Map<string, TopicSettings>();
  const where = `${join(dir, TOPICS_FILE)} (fix or delete it: deleting it resumes every paused topic and removes every rate limit)`;
  for (const [topic, value] of await readTopicsFile(join(dir, TOPICS_FILE), where, 'topics')) {
    settings.set(topic, parseStoredSettings(value, `${where}, topic ${JSON.stringify(topic)}`));
  }
  const pushWhere = `${join(dir, PUSH_FILE)} (fix or delete it: deleting it removes every push target)`;
  for (const [topic, value] of await readTopicsFile(join(dir, PUSH_FILE), pushWhere, 'targets')) {
    const push = parseStoredPush(value, `${pushWhere}, topic ${JSON.stringify(topic)}`);
    settings.set(topic, { ...(settings.get(topic) ?? DEFAULT_TOPIC_SETTINGS), push });
  }
  return settings;
}

/** A `{ version: 1, <field>: { topic: value } }` file's entries; none if it is not there. */
async function readTopicsFile(
  file: string,
  where: string,
  field: string,
): Promise<Array<[string, unknown]>> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw err;
  }
  let parsed: Record<string, unknown>;
  try {
    parsed = JSON.parse(text) as Record<string, unknown>;
  } catch (err) {
    throw new TickwheelCorruptError(`${where}: ${(err as Error).message}`);
  }
  if (parsed?.version !== 1) {
    throw new TickwheelCorruptError(`${where}: not version 1`);
  }
  const topics = parsed[field];
  if (typeof topics !== 'object' || topics === null || Array.isArray(topics)) {
    throw new TickwheelCorruptError(`${where}: no "${field}" object`);
  }
  const entries = Object.entries(topics as Record<string, unknown>);
  for (const [topic] of entries) {
    try {
      checkTopic(topic);
    } catch (err) {
      throw new TickwheelCorruptError(
        `${where}, topic ${JSON.stringify(topic)}: ${(err as Error).message}`,
      );
    }
  }
  return entries;
}

/**
 * Writes topics.json (pauses, rate limits) and push.json (push targets: kept apart, readable
 * by the owner only, so that topics.json holds no secret).
 */
export async function writeTopicSettings(
  dir: string,
  settings: ReadonlyMap<string, TopicSettings>,
): Promise<void> {
  const topics: Record<string, unknown> = {};
  const targets: Record<string, unknown> = {};
  for (const [topic, { paused, rateLimit, push }] of settings) {
    if (paused || rateLimit !== null) topics[topic] = { paused, rateLimit };
    if (push !== null) targets[topic] = push;
  }
  await replaceFile(join(dir, TOPICS_FILE), `${JSON.stringify({ version: 1, topics }, null, 1)}\n`);
  await replaceFile(join(dir, PUSH_FILE), `${JSON.stringify({ version: 1, targets }, null, 1)}\n`);
  await syncDirectory(dir);
}

/**
 * Replaces a small file whole: written beside it, fsynced, renamed over it. The rename is
 * durable only once the directory is synced (syncDirectory), which callers do where it matters.
 */
export async function replaceFile(file: string, text: string): Promise<void> {
  const handle = await open(`${file}.tmp`, 'w', DATA_FILE_MODE);
  try {
    // A file left over from a crash (or copied in) keeps the mode it was made with.
    await handle.chmod(DATA_FILE_MODE);
    await handle.writeFile(text);
    await handle.sync();
  } finally {
    await handle.close();
  }
  await rename(`${file}.tmp`, file);
}

/**
 * The modification time of the newest log segment with a record: the last record written. (A
 * directory copied without its times, or a segment cut by a repair, gives a later time: the
 * lateness of messages that came due before it is then counted from it, so under-reported.)
 */
export async function lastLogWrite(dir: string): Promise<number | undefined> {
  const logDir = join(dir, LOG_DIR);
  const segments = (await readdir(logDir)).filter((name) => /^\d{10}\.seg$/.test(name)).sort();
  // The newest segment with a record: one just rolled over to may be empty.
  for (let i = segments.length - 1; i >= 0; i--) {
    const segment = await stat(join(logDir, segments[i]));
    if (segment.size > 0) return segment.mtimeMs;
  }
  return undefined;
}
