import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, readdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { useTempDirs } from './support/temp-dir.js';

const tempDir = useTempDirs('readme');

/** The README's examples run against the built package, so they cannot rot. */
const root = fileURLToPath(new URL('..', import.meta.url));
const blocks = [
  ...readFileSync(join(root, 'README.md'), 'utf8').matchAll(/```js\n([\s\S]*?)```/g),
].map((match) => match[1]);
const dir = tempDir();
mkdirSync(join(dir, 'node_modules'));
symlinkSync(root, join(dir, 'node_modules', 'tickwheel'), 'dir');

function runExample(code: string): string {
  const file = join(dir, `example-${Math.random().toString(36).slice(2)}.mjs`);
  writeFileSync(file, code);
  return execFileSync(process.execPath, [file], { encoding: 'utf8', timeout: 20_000, cwd: dir });
}

describe('README examples', () => {
  it('the first example prints two heartbeats, the stats, then the idle timeout', () => {
    const out = runExample(blocks[0]);
    expect(out).toMatch(
      /^heartbeat\nheartbeat\n\{[\s\S]*pending: 1,[\s\S]*fired: 3,[\s\S]*\}\nconn-7 idle, closing\n$/,
    );
  });

  it('the delay queue example schedules, shows the status, and consumes the message', () => {
    const example = blocks.find((code) => code.includes('DelayQueue.open'));
    const out = runExample(example!);
    expect(out).toMatch(/status: 'scheduled'/);
    expect(out).toMatch(/send \{ to: 'ada@example.com' \}/);
  });

  it('the ManualClock example fires at virtual time 250', () => {
    const example = blocks.find((code) => code.includes('ManualClock'));
    expect(runExample(example!)).toBe('fired at 250\n');
  });
});

/**
 * Something that looks like a commit hash: 7 to 40 hex digits with a letter and a digit, not a
 * piece of a longer word, number or UUID. (A hash of digits only reads as a number: let it be.)
 */
const COMMIT_HASH = /(?<![\w-])(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}(?![\w-])/g;

/** Phrases that tell how the code came to be rather than what it is. */
const HISTORY = [
  /\bthe code (?:before|of)\b/i,
  /\bno longer\b/i,
  /\bpreviously\b/i,
  /\bused to\b/i,
  /\btoday\b/i,
  /\bre-?runs?\b/i,
  /\bbefore (?:the|this|that|late|it was) (?:change|fix|commit|binding)/i,
  /\bsince (?:commit|the (?:change|fix))\b/i,
  /\bnow\b/i,
];

/** The prose of a Markdown page: fenced code blocks and inline code left out. */
function prose(markdown: string): string {
  return markdown.replace(/```[\s\S]*?```/g, '').replace(/`[^`\n]*`/g, '');
}

function hashesIn(text: string): string[] {
  return [...text.matchAll(COMMIT_HASH)].map((match) => match[0]);
}

describe('the README reads as a description, for a user', () => {
  const readme = readFileSync(join(root, 'README.md'), 'utf8');

  it('is at most 300 lines', () => {
    expect(readme.split('\n').length).toBeLessThanOrEqual(300);
  });

  it('names no commit', () => {
    expect(hashesIn(readme)).toEqual([]);
  });

  it('tells no history', () => {
    const text = prose(readme);
    expect(HISTORY.filter((phrase) => phrase.test(text)).map(String)).toEqual([]);
  });

  it('recognises what it refuses: a hash, history (the rules are not vacuous)', () => {
    expect(hashesIn('on the code of cfa0b57, then 7759e55')).toEqual(['cfa0b57', '7759e55']);
    expect(hashesIn('id 3f2a9c1e-8b7d-4c6e-9f0a-1b2c3d4e5f60, 1e100, deadbeef, sha256')).toEqual(
      [],
    );
    const text = prose('the code before (`now()` is code) is no longer used');
    expect(HISTORY.filter((phrase) => phrase.test(text)).length).toBe(2);
  });
});

describe('the README names every command of the CLI', () => {
  it('each command `tickwheel --help` lists', () => {
    const help = execFileSync(process.execPath, [join(root, 'dist', 'cli', 'main.js'), '--help'], {
      encoding: 'utf8',
    });
    const commands = [...help.split('Commands:')[1].matchAll(/^ {2}([a-z-]+)/gm)]
      .map((match) => match[1])
      .filter((name) => name !== 'help');
    expect(commands.length).toBeGreaterThan(15);
    const readme = readFileSync(join(root, 'README.md'), 'utf8');
    expect(commands.filter((name) => !readme.includes(`\`${name}\``))).toEqual([]);
  });
});

describe('docs/ pages', () => {
  const pages = readdirSync(join(root, 'docs')).filter((name) => name.endsWith('.md'));

  it('name no commit', () => {
    expect(pages.length).toBeGreaterThan(5);
    const found = pages.flatMap((page) =>
      hashesIn(readFileSync(join(root, 'docs', page), 'utf8')).map((hash) => `${page}: ${hash}`),
    );
    expect(found).toEqual([]);
  });
});
