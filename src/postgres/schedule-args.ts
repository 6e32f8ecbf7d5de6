/**
 * tw_schedule's arguments (sql/messages.sql), built from a partition's schedule entries: one
 * element per record, in the entries' order, so that the store appends them in that order; a
 * run's records name their run (1-based), whose window, due span and topic are given once.
 */

import type { ScheduleEntry } from '../partitioned/driver.js';

export class ScheduleArgs {
  private readonly ids: Array<string | null> = [];
  private readonly buckets: number[] = [];
  private readonly dues: Array<number | null> = [];
  private readonly windows: Array<number | null> = [];
  private readonly topics: Array<string | null> = [];
  private readonly records: Buffer[] = [];
  private readonly runs: number[] = [];
  private readonly runWindows: number[] = [];
  private readonly runEarliest: number[] = [];
  private readonly runLatest: number[] = [];
  private readonly runTopics: string[] = [];

  constructor(entries: readonly ScheduleEntry[]) {
    for (const entry of entries) {
      if (entry.kind === 'message') {
        this.push(
          entry.id,
          entry.bucket,
          entry.deliverAt,
          entry.window,
          entry.topic,
          entry.record,
          0,
        );
        continue;
      }
      this.runWindows.push(entry.window);
      this.runEarliest.push(entry.earliest);
      this.runLatest.push(entry.latest);
      this.runTopics.push(entry.topic);
      const run = this.runWindows.length;
      for (const record of entry.records) this.push(null, 0, null, null, null, record, run);
    }
  }

  private push(
    id: string | null,
    bucket: number,
    due: number | null,
    window: number | null,
    topic: string | null,
    record: Buffer,
    run: number,
  ): void {
    this.ids.push(id);
    this.buckets.push(bucket);
    this.dues.push(due);
    this.windows.push(window);
    this.topics.push(topic);
    this.records.push(record);
    this.runs.push(run);
  }

  /** Every window a record of the call may go to (those due before loadedUntil go near). */
  allWindows(): number[] {
    const windows = this.runWindows.slice();
    for (const window of this.windows) if (window !== null) windows.push(window);
    return windows;
  }

  /** $2 to $12 of the call, in order. */
  values(): unknown[] {
    return [
      this.ids,
      this.buckets,
      this.dues,
      this.windows,
      this.topics,
      this.records,
      this.runs,
      this.runWindows,
      this.runEarliest,
      this.runLatest,
      this.runTopics,
    ];
  }
}
