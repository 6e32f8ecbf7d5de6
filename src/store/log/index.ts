/** The message log (message-log.ts) and what its users need of it. */

export {
  LogError,
  describeCause,
  isLogFailure,
  systemErrorsAsIo,
  type LogFailure,
} from './errors.js';
export {
  DATA_DIRECTORY_MODE,
  DATA_FILE_MODE,
  ifExists,
  readFully,
  syncDirectory,
  writeFully,
} from './files.js';
export { RECORD_HEADER_BYTES, RECORD_MAGIC, crc32Range } from './format.js';
export { MessageLog, type ReadResult } from './message-log.js';
export type { FsyncPolicy, LogIo, MessageLogOptions } from './options.js';
export {
  SEGMENT_SPAN,
  offsetOf,
  positionOf,
  segmentFileName,
  segmentOf,
  where,
} from './positions.js';
export type { OnRecord, ReplayOptions, ReplayReport } from './replay.js';
export type { RecordSlot } from './writer.js';
