/**
 * The file store's data directory (its files: docs/storage.md, The pieces): names, format.json,
 * repair.json, topics.json and push.json. The log is the truth; the rest is rebuilt from it
 * (index, snapshot) or says how far to trust it (checkpoint, repair.json). Small files are
 * replaced whole (beside, fsynced, renamed).
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
import {
  DATA_DIRECTORY_MODE,
  DATA_FILE_MODE,
  describeCause,
  ifExists,
  syncDirectory,
} from '../log/index.js';
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
 * Creates the data directory and its parents. A path through a file is a bad `dir`
 * (ERR_TICKWHEEL_INVALID_OPTION); any other failure is ERR_TICKWHEEL_IO.
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
 * Refuses a directory in another on-disk format (one with records but no format.json too: they
 * would be misread), and records the format in a new one.
 */
export async function checkFormat(dir: string): Promise<void> {
  const file = join(dir, FORMAT_FILE);
  const text = await ifExists(readFile(file, 'utf8'));
  if (text !== undefined) {
    let format: unknown;
    try {
      format = (JSON.parse(text) as { format?: unknown }).format;
    } catch {
      format = undefined;
    }
    if (format === STORE_FORMAT) return;
    if (typeof format !== 'number') {
      throw new TickwheelStateError(
        'ERR_TICKWHEEL_FORMAT',
        `${file} is damaged: it holds no format number (${JSON.stringify(text.slice(0, 40))}). ` +
          `If tickwheel of this version wrote the directory, write {"format":${STORE_FORMAT}} ` +
          'into that file and start again',
      );
    }
    throw formatError(dir, `format ${format}`);
  }
  if ((await lastLogWrite(dir)) !== undefined) {
    throw new TickwheelStateError(
      'ERR_TICKWHEEL_FORMAT',
      `${dir} holds a message log but no ${FORMAT_FILE}: it was written in on-disk format 1, ` +
        `which this version does not read, or ${FORMAT_FILE} was deleted. If tickwheel of this ` +
        `version wrote the directory, write {"format":${STORE_FORMAT}} into ${file} and start ` +
        'again; otherwise drain it with the version that wrote it',
    );
  }
  await replaceFile(file, JSON.stringify({ format: STORE_FORMAT }));
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
  const text = await ifExists(readFile(join(dir, REPAIR_FILE), 'utf8'));
  try {
    const { accepted, reports } = JSON.parse(text ?? '{}') as Partial<Repairs>;
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
 * Topics' settings (topics.json, push targets in push.json). An unreadable file is
 * ERR_TICKWHEEL_CORRUPT, not "nothing paused": a damaged file must not start a paused topic.
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
  const text = await ifExists(readFile(file, 'utf8'));
  if (text === undefined) return [];
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

/** Writes topics.json and push.json (targets kept apart, so topics.json holds no secret). */
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

/** Replaces a small file whole (beside, fsynced, renamed); durable once the directory syncs. */
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
 * The modification time of the newest segment with a record, if any (copied without times, or
 * cut by a repair, it is later: lateness is then under-reported).
 */
export async function lastLogWrite(dir: string): Promise<number | undefined> {
  const logDir = join(dir, LOG_DIR);
  const names = (await ifExists(readdir(logDir))) ?? [];
  const segments = names.filter((name) => /^\d{10}\.seg$/.test(name)).sort();
  for (let i = segments.length - 1; i >= 0; i--) {
    const segment = await stat(join(logDir, segments[i]));
    if (segment.size > 0) return segment.mtimeMs;
  }
  return undefined;
}
