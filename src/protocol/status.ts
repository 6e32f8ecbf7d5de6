/** The HTTP status of every error code: the catalogue in src/errors.ts holds both. */

export { HTTP_STATUS, isErrorCode } from '../errors.js';
