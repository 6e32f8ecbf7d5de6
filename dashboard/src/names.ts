/**
 * The queue's rules for topic names and message ids, checked on the page so that a typo gets a
 * plain sentence instead of the server's schema error. They copy TOPIC_PATTERN and ID_PATTERN of
 * src/queue/message.ts (which the page cannot import: it needs node:crypto);
 * test/dashboard/names.test.ts fails when the two drift apart.
 */

export const TOPIC_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;
export const ID_PATTERN = /^[A-Za-z0-9._:@-]{1,200}$/;

export const TOPIC_RULE =
  "A topic name is 1-128 letters, digits, '.', '_', ':' or '-', starting with a letter or digit.";
export const ID_RULE = "A message id is 1-200 letters, digits, '.', '_', ':', '@' or '-'.";

/** What is wrong with a topic name, or null when the queue would take it. */
export function topicProblem(name: string): string | null {
  if (name === '') return 'Type a topic name.';
  return TOPIC_PATTERN.test(name) ? null : TOPIC_RULE;
}

/** What is wrong with a message id, or null when the queue would take it. */
export function idProblem(id: string): string | null {
  if (id === '') return 'Type a message id.';
  return ID_PATTERN.test(id) ? null : ID_RULE;
}
