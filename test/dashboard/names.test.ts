import { describe, expect, it } from 'vitest';
import {
  ID_PATTERN,
  ID_RULE,
  TOPIC_PATTERN,
  TOPIC_RULE,
  idProblem,
  topicProblem,
} from '../../dashboard/src/names.js';
import * as queue from '../../src/queue/message.js';

describe("the dashboard's name rules", () => {
  it('are the queue rules', () => {
    expect(TOPIC_PATTERN.source).toBe(queue.TOPIC_PATTERN.source);
    expect(TOPIC_PATTERN.flags).toBe(queue.TOPIC_PATTERN.flags);
    expect(ID_PATTERN.source).toBe(queue.ID_PATTERN.source);
    expect(ID_PATTERN.flags).toBe(queue.ID_PATTERN.flags);
  });

  it('take what checkTopic and checkId take, and refuse the rest with a plain sentence', () => {
    const topics = ['emails', 'a', 'orders.v2', 'tenant:7_jobs-x', '9', 'x'.repeat(128)];
    const badTopics = ['bad topic!', '.hidden', '-x', 'x'.repeat(129), 'émails', 'a/b'];
    for (const topic of topics) {
      expect(() => queue.checkTopic(topic)).not.toThrow();
      expect(topicProblem(topic)).toBeNull();
    }
    for (const topic of badTopics) {
      expect(() => queue.checkTopic(topic)).toThrow();
      expect(topicProblem(topic)).toBe(TOPIC_RULE);
    }
    expect(topicProblem('')).toBe('Type a topic name.');

    for (const id of ['01J0ABC', 'order@17', 'a.b:c_d-e', 'x'.repeat(200)]) {
      expect(() => queue.checkId(id)).not.toThrow();
      expect(idProblem(id)).toBeNull();
    }
    for (const id of ['a b', 'x'.repeat(201), 'a/b', 'ünï']) {
      expect(() => queue.checkId(id)).toThrow();
      expect(idProblem(id)).toBe(ID_RULE);
    }
    expect(idProblem('')).toBe('Type a message id.');
  });
});
