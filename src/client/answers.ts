/**
 * The shapes of a tickwheel server's successful answers, as the client checks them (Exchange's
 * `expect`): JSON of another shape comes from something else on that URL, and is refused with
 * ERR_TICKWHEEL_HTTP rather than passed off as a message, a page or the stats.
 */

type Answer = Record<string, unknown>;

function isObject(value: unknown): value is Answer {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Whether an answer's field is an array of `length` entries. */
export function listOf(field: unknown, length: number): boolean {
  return Array.isArray(field) && field.length === length;
}

/** A MessageInfo: GET /v1/messages/:id, and each entry of a page or the dead letters. */
export function isMessageInfo(value: unknown): boolean {
  return (
    isObject(value) &&
    typeof value.id === 'string' &&
    typeof value.topic === 'string' &&
    typeof value.status === 'string' &&
    typeof value.deliverAt === 'number' &&
    typeof value.attempts === 'number'
  );
}

/** `{ messages: MessageInfo[] }`, with a string `cursor` or none: a page, or the dead letters. */
export function isMessagePage(answer: Answer): boolean {
  return (
    Array.isArray(answer.messages) &&
    answer.messages.every(isMessageInfo) &&
    (answer.cursor === undefined || typeof answer.cursor === 'string')
  );
}

/** A TopicInfo: GET /v1/topics/:topic, and the answer of every change to one. */
export function isTopic(value: unknown): boolean {
  return isObject(value) && typeof value.topic === 'string' && typeof value.paused === 'boolean';
}

/** A page of GET /v1/topics. */
export function isTopicList(answer: Answer): boolean {
  return (
    Array.isArray(answer.topics) &&
    answer.topics.every(isTopic) &&
    (answer.cursor === undefined || typeof answer.cursor === 'string')
  );
}

/** A ScheduleInfo: GET, PUT and PATCH /v1/schedules/:name. */
export function isSchedule(value: unknown): boolean {
  return (
    isObject(value) &&
    typeof value.name === 'string' &&
    typeof value.topic === 'string' &&
    typeof value.createdAt === 'number'
  );
}

export function isScheduleList(answer: Answer): boolean {
  return Array.isArray(answer.schedules) && answer.schedules.every(isSchedule);
}

/** GET /v1/stats: the queue's counters and the server's own figures. */
export function isStats(answer: Answer): boolean {
  return (
    typeof answer.scheduled === 'number' &&
    isObject(answer.topics) &&
    isObject(answer.server) &&
    typeof answer.server.version === 'string'
  );
}

/** GET /healthz */
export function isHealth(answer: Answer): boolean {
  return typeof answer.status === 'string';
}

/** `{ [field]: true }`: what DELETE, requeue and the like answer. */
export function says(field: string): (answer: Answer) => boolean {
  return (answer) => answer[field] === true;
}
