/** Bounds of the HTTP API: the server enforces them, the client checks them before sending. */

/** Messages in one batch schedule; receipts in one ack or nack. */
export const MAX_BATCH = 10_000;
/** Messages in one receive. */
export const MAX_RECEIVE = 1000;
/** Default and largest `maxBytes` of one receive over HTTP. */
export const DEFAULT_RECEIVE_BYTES = 8 * 1024 * 1024;
export const MAX_RECEIVE_BYTES = 64 * 1024 * 1024;
/** The most the client reads of one answer: a largest receive in JSON, with room to spare. */
export const MAX_ANSWER_BYTES = 4 * MAX_RECEIVE_BYTES;
export const MAX_RECEIPT_LENGTH = 512;

/** The queue's longest visibility timeout, long poll and nack delay (src/queue/options.ts). */
export const MAX_VISIBILITY_MS = 43_200_000;
export const MAX_WAIT_MS = 3_600_000;
export const MAX_NACK_DELAY_MS = 86_400_000 * 365;

/** Topics in one page of topicList(), and named in stats() at most; their defaults. */
export const MAX_TOPIC_PAGE = 1_000;
export const DEFAULT_TOPIC_PAGE = 100;
/** The same as the topics /metrics labels by default. */
export const DEFAULT_STATS_TOPICS = 100;
