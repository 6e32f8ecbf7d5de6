/**
 * Reads of every partition's counts (`<topic>|<status letter>` -> live messages), bounded per
 * node. With many topics one read is large (200,000 topics over 64 partitions: ~5 MB, about a
 * second): partitions are read a few at a time, so that the answers do not hold up this node's
 * lease renewals on the same connection, and one read runs at a time. Callers that come while
 * a read runs share the next one, which starts after they asked: every answer counts what was
 * written before its call, and any number of callers make at most two reads.
 */

import type { TopicStateCounts as TopicCounts } from '../protocol/model.js';
import { STATUS_LETTERS, type PartitionDriver } from './driver.js';

/** Partitions whose counts are read at once. */
export const COUNT_READS = 4;

type Status = keyof TopicCounts;
type Counts = Record<string, number>;

/** Live statuses by their letters in the partitions' counts. */
const STATUSES: Record<(typeof STATUS_LETTERS)[number], Status> = {
  S: 'scheduled',
  R: 'ready',
  I: 'inflight',
  D: 'dead',
};

/** The status a letter of the counts stands for; undefined for none. */
export function statusOf(letter: string): Status | undefined {
  return (STATUSES as Record<string, Status | undefined>)[letter];
}

/** One read of every partition's counts, folded. Shared by its callers: not to be changed. */
export interface QueueCounts {
  readonly totals: Readonly<TopicCounts>;
  readonly topics: ReadonlyMap<string, Readonly<TopicCounts>>;
  /** Scheduled messages per partition. */
  readonly scheduled: readonly number[];
}

export class CountsReads {
  private running: Promise<QueueCounts> | undefined;
  private next: Promise<QueueCounts> | undefined;

  constructor(
    private readonly driver: PartitionDriver,
    private readonly partitions: number,
  ) {}

  read(): Promise<QueueCounts> {
    if (this.next !== undefined) return this.next;
    if (this.running === undefined) return this.start();
    this.next = this.running
      .then(
        () => {},
        () => {},
      )
      .then(() => {
        this.next = undefined;
        return this.start();
      });
    return this.next;
  }

  private start(): Promise<QueueCounts> {
    const running = this.readAll().finally(() => {
      if (this.running === running) this.running = undefined;
    });
    this.running = running;
    return running;
  }

  private async readAll(): Promise<QueueCounts> {
    const none = (): TopicCounts => ({ scheduled: 0, ready: 0, inflight: 0, dead: 0 });
    const totals = none();
    const topics = new Map<string, TopicCounts>();
    const scheduled = new Array<number>(this.partitions).fill(0);
    for (let first = 0; first < this.partitions; first += COUNT_READS) {
      const last = Math.min(this.partitions, first + COUNT_READS);
      const turn = Array.from({ length: last - first }, (_, i) => this.driver.counts(first + i));
      // Settled all before a failure is answered: the next read must not overlap this one's.
      const answers = await Promise.allSettled(turn);
      for (const answer of answers) if (answer.status === 'rejected') throw answer.reason;
      answers.forEach(
        (answer, i) => answer.status === 'fulfilled' && fold(first + i, answer.value),
      );
    }
    return { totals, topics, scheduled };

    function fold(partition: number, counts: Counts): void {
      for (const field in counts) {
        const n = counts[field];
        const bar = field.lastIndexOf('|');
        const status = statusOf(field.slice(bar + 1));
        if (status === undefined || n === 0) continue;
        totals[status] += n;
        if (status === 'scheduled') scheduled[partition] += n;
        const topic = field.slice(0, bar);
        let of = topics.get(topic);
        if (of === undefined) topics.set(topic, (of = none()));
        of[status] += n;
      }
    }
  }
}
