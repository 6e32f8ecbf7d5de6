/**
 * schedules.log: recurring schedules' records (src/queue/recurring.ts), a line per change,
 * `<crc32 hex> <json>\n`, the JSON a record or `{"deleted":"<name>"}`; the last line per name
 * wins. A torn last line is cut; a bad line elsewhere is ERR_TICKWHEEL_CORRUPT, never skipped
 * (that could bring a deleted schedule back). A file over twice its live records (and 1,000
 * lines) is rewritten. Changes arriving during an append go out together in the next one.
 */

import { open, readFile, truncate, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import { TickwheelCorruptError, TickwheelUnavailableError } from '../../errors.js';
import type { ScheduleRecord } from '../../queue/recurring.js';
import { DATA_FILE_MODE, crc32Range, ifExists, syncDirectory } from '../log/index.js';
import { replaceFile } from './layout.js';

const SCHEDULES_FILE = 'schedules.log';

type Line = ScheduleRecord | { deleted: string };

function encode(line: Line): string {
  const json = JSON.stringify(line);
  return `${checksum(json).toString(16).padStart(8, '0')} ${json}\n`;
}

/**
 * Whether the text after the last whole line is what a crash during an append leaves: the start
 * of a line (checksum, space, JSON), maybe followed by the zeros of a file lengthened before its
 * data was written; zeros alone only after a whole line (a file of zeros alone, or text that no
 * append writes, is damage: cutting it would drop schedules without a word).
 */
function isTorn(tail: string, afterLine: boolean): boolean {
  const start = /^(?:[0-9a-f]{0,8}|[0-9a-f]{8} [^\n\0]*)(\0*)$/.exec(tail);
  if (start === null) return false;
  return afterLine || start[1].length < tail.length;
}

export class ScheduleLog {
  private handle: FileHandle | undefined;
  private pending: Array<{ line: string; name: string; deleted: boolean }> = [];
  private waiting: Array<{ resolve: () => void; reject: (err: unknown) => void }> = [];
  private writing = false;
  /** Bytes of whole lines in the file: a failed append is cut back to it. */
  private size = 0;
  /** Set when a failed append could not be cut back: no write is taken after it. */
  private broken: Error | undefined;

  /** Lines in the file, and the latest line of each live schedule: for compaction. */
  private lines = 0;
  private readonly latest = new Map<string, string>();

  private constructor(
    private readonly file: string,
    private readonly dir: string,
  ) {}

  /** Reads the live records, compacting the file when it is mostly old. */
  static async open(dir: string): Promise<{ log: ScheduleLog; records: ScheduleRecord[] }> {
    const file = join(dir, SCHEDULES_FILE);
    const log = new ScheduleLog(file, dir);
    const text = (await ifExists(readFile(file, 'utf8'))) ?? '';
    const live = new Map<string, ScheduleRecord>();
    let lines = 0;
    let at = 0;
    while (at < text.length) {
      const end = text.indexOf('\n', at);
      const line = end === -1 ? text.slice(at) : text.slice(at, end);
      const parsed = end === -1 ? undefined : decode(line);
      if (parsed === undefined) {
        // Only the last line may be torn; anything after it means damage.
        const last = end === -1 || end === text.length - 1;
        if (last && (isTorn(line, lines > 0) || (end !== -1 && lines > 0))) {
          await truncate(file, Buffer.byteLength(text.slice(0, at)));
          break;
        }
        throw new TickwheelCorruptError(
          `${file}: line ${lines + 1} is damaged (bad checksum or JSON, or bytes no append ` +
            'leaves); the recurring schedules cannot be read safely. Restore the file from a ' +
            'backup, or remove the damaged line (that schedule is then as of its previous ' +
            'line, or gone); a file that holds nothing else may be removed',
        );
      }
      lines++;
      if ('deleted' in parsed) live.delete(parsed.deleted);
      else live.set(parsed.name, parsed);
      at = end + 1;
    }
    const records = [...live.values()];
    log.size = Buffer.byteLength(text.slice(0, at));
    log.lines = lines;
    for (const record of records) log.latest.set(record.name, encode(record));
    await log.compactIfMostlyOld();
    return { log, records };
  }

  /** Rewrites the file with the live records (beside, fsynced, renamed) when mostly old. */
  private async compactIfMostlyOld(): Promise<void> {
    if (this.lines <= 1_000 || this.lines <= 2 * this.latest.size) return;
    const compacted = [...this.latest.values()].join('');
    await this.handle?.close();
    this.handle = undefined;
    await replaceFile(this.file, compacted);
    await syncDirectory(this.dir);
    this.size = Buffer.byteLength(compacted);
    this.lines = this.latest.size;
  }

  /** Appends records and deletions; resolves once they are on disk. */
  write(records: readonly ScheduleRecord[], deleted: readonly string[]): Promise<void> {
    for (const record of records) {
      this.pending.push({ line: encode(record), name: record.name, deleted: false });
    }
    for (const name of deleted) {
      this.pending.push({ line: encode({ deleted: name }), name, deleted: true });
    }
    return new Promise((resolve, reject) => {
      this.waiting.push({ resolve, reject });
      if (!this.writing) void this.flush();
    });
  }

  private async flush(): Promise<void> {
    this.writing = true;
    while (this.waiting.length > 0) {
      const pending = this.pending;
      let text = '';
      for (const { line } of pending) text += line;
      const waiting = this.waiting;
      this.pending = [];
      this.waiting = [];
      try {
        if (this.broken !== undefined) throw this.broken;
        this.handle ??= await open(this.file, 'a', DATA_FILE_MODE);
        await this.handle.appendFile(text);
        await this.handle.datasync();
        this.size += Buffer.byteLength(text);
        this.lines += pending.length;
        for (const { line, name, deleted } of pending) {
          if (deleted) this.latest.delete(name);
          else this.latest.set(name, line);
        }
        for (const waiter of waiting) waiter.resolve();
        // Every occurrence appends a record; a failed compaction leaves the old file whole.
        await this.compactIfMostlyOld().catch(() => undefined);
      } catch (err) {
        // Cut off part-written lines, or a later line glued to a torn one is lost with it.
        if (this.broken === undefined) {
          try {
            await this.handle?.truncate(this.size);
            await this.handle?.datasync();
          } catch (cut) {
            this.broken = new TickwheelUnavailableError(
              'ERR_TICKWHEEL_IO',
              `${this.file}: a failed append could not be cut back (${(cut as Error).message}); restart to recover`,
            );
          }
        }
        for (const waiter of waiting) waiter.reject(err);
      }
    }
    this.writing = false;
  }

  async close(): Promise<void> {
    while (this.writing) await new Promise((resolve) => setImmediate(resolve));
    await this.handle?.close();
    this.handle = undefined;
  }
}

function checksum(json: string): number {
  const bytes = Buffer.from(json);
  return crc32Range(bytes, 0, bytes.length, 0) >>> 0;
}

function decode(line: string): Line | undefined {
  const space = line.indexOf(' ');
  if (space !== 8) return undefined;
  const json = line.slice(9);
  if (parseInt(line.slice(0, 8), 16) !== checksum(json)) return undefined;
  try {
    const value = JSON.parse(json) as Line;
    return typeof value === 'object' && value !== null ? value : undefined;
  } catch {
    return undefined;
  }
}
