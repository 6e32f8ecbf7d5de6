/**
 * Which schedule-index file an entry goes to: a hierarchical timing wheel on disk (docs/
 * storage.md, The schedule index, has a worked example). A level-L file covers 2^L windows,
 * aligned to its span; an entry due n whole windows after the frontier goes to the level
 * floor(log2(n)) file holding its due time (level 0 for n < 2), so at most three files of each
 * level exist. When the frontier passes a file's start, its entries are handed over or appended
 * again a level lower: each is written once per level. A file's key is `<start>` at level 0,
 * else `<start>.<level>`; its name is `<key>.idx`.
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
