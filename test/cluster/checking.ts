/**
 * The partitioned engine's Producer takes requests the queue has checked already
 * (src/queue/checked-queue.ts). Tests that drive a part directly check theirs here, as the
 * queue would: `checking(part)` is the part with schedule(), scheduleMany() and reschedule()
 * taking what a user gives.
 */

import type { PartitionedBackend } from '../../src/partitioned/backend.js';
import type { DelayQueue } from '../../src/delay-queue.js';
import {
  checkRequest,
  rescheduleTime,
  type CheckedRequest,
  type ScheduleRequest,
} from '../../src/queue/message.js';

type Scheduled = { id: string; deliverAt: number };

interface Part {
  schedule(request: CheckedRequest): Promise<Scheduled>;
  scheduleMany(requests: readonly CheckedRequest[]): Promise<Scheduled[]>;
  rescheduleTo(id: string, deliverAt: number): Promise<number | undefined>;
}

export type Checking<T extends Part> = Omit<T, 'schedule' | 'scheduleMany'> & {
  schedule(request: ScheduleRequest): Promise<Scheduled>;
  scheduleMany(requests: readonly ScheduleRequest[]): Promise<Scheduled[]>;
  reschedule(id: string, when: { delayMs?: number; deliverAt?: number }): Promise<boolean>;
};

/** A request checked as the queue checks it (payloads up to 1 MiB). */
export function checked(request: ScheduleRequest): CheckedRequest {
  return checkRequest(request, Date.now(), 1 << 20);
}

export function checking<T extends Part>(part: T): Checking<T> {
  const calls: Record<string, unknown> = {
    schedule: (request: ScheduleRequest) => part.schedule(checked(request)),
    scheduleMany: (requests: readonly ScheduleRequest[]) =>
      part.scheduleMany(requests.map(checked)),
    reschedule: async (id: string, when: { delayMs?: number; deliverAt?: number }) =>
      (await part.rescheduleTo(id, rescheduleTime(when, Date.now()))) !== undefined,
  };
  return new Proxy(part, {
    get(target, name, receiver) {
      if (typeof name === 'string' && name in calls) return calls[name];
      const value: unknown = Reflect.get(target, name, receiver);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  }) as unknown as Checking<T>;
}

/** The node under a queue opened on Valkey/Redis (`DelayQueue.open({ redis })`). */
export function nodeOf(queue: DelayQueue): PartitionedBackend {
  return (queue as unknown as { backend: PartitionedBackend }).backend;
}
