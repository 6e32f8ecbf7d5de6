import { describe, expect, it } from 'vitest';
// @ts-expect-error: a plain JavaScript module of the benches.
import { parseOptions, resultsBase } from '../bench/queue/run.mjs';

// Which files a bench:queue run writes: only a full run (or one told where with --out) writes
// queue.json and queue.md, so that a partial run never replaces the committed full one.

type Options = { workloads: string[]; peers: string[] };

function baseOf(argv: string[], peers?: string[]): string {
  const options = parseOptions(argv) as Options;
  return resultsBase({ ...options, peers: peers ?? options.peers }) as string;
}

describe('bench:queue result file names', () => {
  it('a full run, with or without --large, writes queue.*', () => {
    expect(baseOf([])).toBe('queue');
    expect(baseOf(['--large'])).toBe('queue');
    expect(baseOf(['--peers', 'tickwheel,bullmq', '--data-dir', '/tmp'])).toBe('queue');
  });

  it('a run of some workloads writes files named after them', () => {
    expect(baseOf(['--only', 'burst'])).toBe('queue-burst');
    expect(baseOf(['--only', 'burst,steady', '--quick'])).toBe('queue-burst+steady-quick');
    expect(baseOf(['--only', 'payload-memory'])).toBe('queue-payload-memory');
  });

  it('all workloads with other settings, or one peer, write queue-custom.*', () => {
    expect(baseOf(['--n', '1000'])).toBe('queue-custom');
    expect(baseOf(['--quick'])).toBe('queue-custom-quick');
    expect(baseOf(['--peers', 'tickwheel'])).toBe('queue-custom');
    // BullMQ skipped because redis-server or bullmq is missing: not a full run either.
    expect(baseOf([], ['tickwheel'])).toBe('queue-custom');
  });

  it('--out names the place: queue.* there, whatever the run', () => {
    expect(baseOf(['--only', 'burst', '--out', '/tmp/x'])).toBe('queue');
  });

  it('payload-memory sizes are MiB unless a unit says otherwise', () => {
    const options = parseOptions([
      '--payload-backlogs',
      '1GiB,128,512MiB',
      '--payload-size',
      '256KiB',
    ]) as { backlogs: number[]; payloadBytes: number };
    expect(options.backlogs).toEqual([128, 512, 1024].map((mib) => mib * 2 ** 20));
    expect(options.payloadBytes).toBe(256 * 1024);
    expect(() => parseOptions(['--payload-size', '0'])).toThrow(/--payload-size/);
  });
});
