/**
 * Which schedule-index file an entry goes to: a hierarchical timing wheel on disk.
 *
 * A file covers 2^level windows, aligned to its span. An entry due `n` whole windows after the
 * frontier goes to the level floor(log2(n)) file holding its due time (level 0 for n < 2), so
 * a level-L file starts within 2^(L+1) windows of the frontier: as the frontier only moves
 * forward, at most three files of each level exist, about 80 in all for due times 200 years
 * ahead in windows of a minute, however the due times spread.
 *
 * When the frontier passes a file's start it is read whole: entries due before the frontier go
 * to the queue, the others are appended again a level lower. Each is written once per level.
 *
 * Worked example, windowMs = 60 s, frontier 12:00 (level-L spans: 1, 2, 4, 8, ... minutes; a
 * span starts at a multiple of its length, counted from midnight here for short numbers):
 *
 *   due 12:00:30  n = 0  → level 0, file 12:00 (12:00-12:01)
 *   due 12:05:10  n = 5  → level 2, file 12:04 (12:04-12:08)
 *   due 13:10:00  n = 70 → level 6, file 12:48 (12:48-13:52)
 *   frontier 12:49: file 12:48 (level 6) is read; the 13:10 entry, now n = 21 windows ahead,
 *   goes to level 4, file 13:04 (13:04-13:20)
 *
 * A file's key is its start, for level 0 (`<start>.idx`), or `<start>.<level>` (file
 * `<start>.<level>.idx`).
 */

/** The highest level: spans of 2^52 windows, beyond any due time a queue takes. */
const MAX_LEVEL = 52;

export interface IndexFile {
  key: string;
  start: number;
  /** Where its span ends (exclusive): every entry it holds is due before this. */
  end: number;
  level: number;
}

const NAME = /^(-?\d+)(?:\.(\d+))?\.idx$/;

/** The file a key names, or undefined for a name that is no index file. */
export function parseFileName(name: string, windowMs: number): IndexFile | undefined {
  const match = NAME.exec(name);
  if (match === null) return undefined;
  const level = match[2] === undefined ? 0 : Number(match[2]);
  if (level > MAX_LEVEL) return undefined;
  return fileAt(Number(match[1]), level, windowMs);
}

export function fileName(key: string): string {
  return `${key}.idx`;
}

/** The file of `level` whose span starts at `start`. */
function fileAt(start: number, level: number, windowMs: number): IndexFile {
  return {
    key: level === 0 ? String(start) : `${start}.${level}`,
    start,
    end: start + windowMs * 2 ** level,
    level,
  };
}

/** The level of the file an entry due at `deliverAt` goes to while the frontier is `frontier`. */
export function levelFor(deliverAt: number, frontier: number, windowMs: number): number {
  const ahead = Number.isFinite(frontier) ? Math.floor((deliverAt - frontier) / windowMs) : 0;
  if (ahead < 2) return 0;
  const level = Math.min(MAX_LEVEL, Math.floor(Math.log2(ahead)));
  // log2 rounds up just below a large power of two: the span must not exceed what is ahead.
  return 2 ** level > ahead ? level - 1 : level;
}

/** The file an entry due at `deliverAt` goes to while the frontier is `frontier`. */
export function fileFor(deliverAt: number, frontier: number, windowMs: number): IndexFile {
  const level = levelFor(deliverAt, frontier, windowMs);
  const span = windowMs * 2 ** level;
  return fileAt(Math.floor(deliverAt / span) * span, level, windowMs);
}

/** Files in the order they come within the horizon: by start, then the shorter first. */
export function byStart(a: IndexFile, b: IndexFile): number {
  return a.start - b.start || a.level - b.level;
}
