/**
 * Topics' settings of a partitioned queue (src/queue/topics.ts): pause and rate limit in the
 * store's topics' settings, push targets apart, token buckets by the driver's `tokens` (one per
 * topic for all nodes). Every node reads them at start and at each heartbeat; a change is
 * written as durably as a message.
 */

import { setTimeout as delay } from 'node:timers/promises';
import { TickwheelCorruptError } from '../errors.js';
import { checkTopic } from '../queue/message.js';
import {
  DEFAULT_TOPIC_SETTINGS,
  isDefaultSettings,
  parseStoredPush,
  parseStoredSettings,
  TopicGate,
  type RateLimit,
  type TopicSettings,
} from '../queue/topics.js';
import type { PartitionDriver } from './driver.js';

/** A topic's settings, one field each in the topics' settings. */
const SETTING_FIELDS = ['paused', 'rateLimit'] as const;

/**
 * A node's topic gate over the settings in the store: a change made here applies here at once,
 * on other nodes when they refresh() (at each heartbeat).
 */
export class PartitionTopics {
  readonly gate: TopicGate;
  private refreshing: Promise<void> | undefined;
  /** Changes of topics' settings made by this node. */
  private writes = 0;

  constructor(
    private readonly driver: PartitionDriver,
    /** Wakes the node's long polls on a topic whose settings changed. */
    wake: (topic: string) => void,
    private readonly onError: (err: unknown) => void,
  ) {
    const tokens = (topic: string, limit: RateLimit, want: number) =>
      driver.tokens(topic, limit, want);
    this.gate = new TopicGate(
      {
        load: () => this.read(),
        save: (topic, _value, update) => {
          this.writes++;
          return this.write(topic, update);
        },
      },
      {
        take: tokens,
        refund: async (topic, limit, count) => {
          await tokens(topic, limit, -count);
        },
      },
      Date.now,
      // Resolves early, not rejecting, when the signal aborts.
      (ms, signal) => delay(ms, undefined, { signal }).catch(() => {}),
      wake,
      onError,
    );
  }

  /** Reads the settings again, one read at a time. */
  refresh(): void {
    if (this.refreshing !== undefined) return;
    // A read overtaken by a change made here would undo it until the next one: dropped.
    const writes = this.writes;
    this.refreshing = this.read()
      .then((settings) => {
        if (this.writes === writes) this.gate.replace(settings);
      })
      .catch((err) => this.onError(err))
      .finally(() => (this.refreshing = undefined));
  }

  /**
   * One field per topic and setting (`<topic>|paused`, `<topic>|rateLimit`: JSON), so two nodes
   * changing different settings of a topic at once both land. Absent: the default.
   */
  private async read(): Promise<Map<string, TopicSettings>> {
    const { where: key, fields: stored } = await this.driver.topicFields('settings');
    const fields = new Map<string, Record<string, unknown>>();
    for (const [field, text] of Object.entries(stored)) {
      const bar = field.lastIndexOf('|');
      const topic = field.slice(0, bar);
      const name = field.slice(bar + 1);
      let value: unknown;
      try {
        value = JSON.parse(text);
      } catch {
        value = undefined;
      }
      if (bar < 1 || !(SETTING_FIELDS as readonly string[]).includes(name) || value === undefined) {
        throw new TickwheelCorruptError(
          `${key} field ${JSON.stringify(field)}: stored topic settings cannot be read (${JSON.stringify(text).slice(0, 100)})`,
        );
      }
      let given = fields.get(topic);
      if (given === undefined) fields.set(topic, (given = { paused: false, rateLimit: null }));
      given[name] = value;
    }
    const settings = new Map<string, TopicSettings>();
    for (const [topic, given] of fields) {
      const where = `${key} topic ${JSON.stringify(topic)}`;
      try {
        checkTopic(topic);
      } catch (err) {
        throw new TickwheelCorruptError(`${where}: ${(err as Error).message}`);
      }
      const parsed = parseStoredSettings(given, where);
      if (!isDefaultSettings(parsed)) settings.set(topic, parsed);
    }
    // Push targets: errors never quote one (secrets).
    const { where: pushes, fields: targets } = await this.driver.topicFields('push');
    for (const [topic, text] of Object.entries(targets)) {
      const where = `${pushes} topic ${JSON.stringify(topic)}`;
      let value: unknown;
      try {
        checkTopic(topic);
        value = JSON.parse(text);
      } catch (err) {
        throw new TickwheelCorruptError(
          `${where}: stored push target cannot be read (${err instanceof SyntaxError ? 'not JSON' : (err as Error).message})`,
        );
      }
      const push = parseStoredPush(value, where);
      settings.set(topic, { ...(settings.get(topic) ?? DEFAULT_TOPIC_SETTINGS), push });
    }
    return settings;
  }

  /** Writes the fields `update` changes; resolves once durable. */
  private async write(topic: string, update: Partial<TopicSettings>): Promise<void> {
    const set: Record<string, string> = {};
    const cleared: string[] = [];
    for (const name of SETTING_FIELDS) {
      const value = update[name];
      // The default (not paused, no limit) is no field.
      if (value === false || value === null) cleared.push(`${topic}|${name}`);
      else if (value !== undefined) set[`${topic}|${name}`] = JSON.stringify(value);
    }
    if (Object.keys(set).length > 0 || cleared.length > 0) {
      await this.driver.setTopicFields('settings', set, cleared, `the settings of topic ${topic}`);
    }
    if (update.push !== undefined) {
      const what = `the push target of topic ${topic}`;
      if (update.push === null) await this.driver.setTopicFields('push', {}, [topic], what);
      else {
        const target = { [topic]: JSON.stringify(update.push) };
        await this.driver.setTopicFields('push', target, [], what);
      }
    }
  }
}
