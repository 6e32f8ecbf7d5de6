/**
 * Requests from web pages the server did not serve. A page can send a POST without a CORS
 * preflight (it cannot read the answer, but a receive takes messages), so every POST must be
 * `application/json`. Against DNS rebinding the server answers only to localhost, IP literals
 * and the Host names it was given, token or not (/metrics, /healthz and / need none).
 */

import { isIP } from 'node:net';
import type { onRequestHookHandler } from 'fastify';
import { invalidOption } from '../validate.js';
import { httpError } from './errors.js';

/** A host name as a Host header carries it: letters, digits, dots and dashes. */
const HOST_NAME = /^[a-z0-9][a-z0-9.-]*$/i;

export function checkAllowedHosts(names: unknown): string[] {
  if (
    !Array.isArray(names) ||
    names.some((name) => typeof name !== 'string' || name.length > 253 || !HOST_NAME.test(name))
  ) {
    throw invalidOption(
      'allowedHosts must be an array of host names (letters, digits, dots and dashes)',
    );
  }
  return names.map((name: string) => normalise(name));
}

function normalise(name: string): string {
  const lower = name.toLowerCase();
  return lower.endsWith('.') ? lower.slice(0, -1) : lower;
}

/** The host name of a Host header without its port; undefined when malformed. */
function hostName(header: string): string | undefined {
  if (header.startsWith('[')) {
    const end = header.indexOf(']');
    if (end < 0) return undefined;
    const rest = header.slice(end + 1);
    if (rest !== '' && !/^:\d*$/.test(rest)) return undefined;
    return header.slice(1, end);
  }
  const colon = header.indexOf(':');
  if (colon >= 0 && !/^\d*$/.test(header.slice(colon + 1))) return undefined;
  return normalise(colon >= 0 ? header.slice(0, colon) : header);
}

/** An onRequest hook that refuses Host names the server does not answer to. */
export function hostCheck(allowed: readonly string[]): onRequestHookHandler {
  const names = new Set(['localhost', ...allowed]);
  const known = [...names].join(', ');
  return (request, _reply, done) => {
    const header = request.headers.host;
    if (header === undefined) {
      // A request without Host (HTTP/1.0) does not come from a browser; HTTP/1.1 requires one.
      if (request.raw.httpVersion === '1.0') return done();
      return done(
        httpError('ERR_TICKWHEEL_INVALID_REQUEST', 'an HTTP/1.1 request needs a Host header'),
      );
    }
    const name = hostName(header);
    if (name !== undefined && (names.has(name) || isIP(name) !== 0)) return done();
    done(
      httpError(
        'ERR_TICKWHEEL_HOST_NOT_ALLOWED',
        `this server answers to ${known} and IP addresses, not to Host ` +
          `${JSON.stringify(header.slice(0, 100))} (a web page could reach it through DNS ` +
          'rebinding); to serve that name, add it to --allowed-hosts (allowedHosts)',
      ),
    );
  };
}

function isJson(contentType: string | undefined): boolean {
  return contentType?.split(';', 1)[0].trim().toLowerCase() === 'application/json';
}

/** An onRequest hook that refuses a POST a web page could send without a preflight. */
export const jsonPostsOnly: onRequestHookHandler = (request, _reply, done) => {
  if (request.method !== 'POST' || isJson(request.headers['content-type'])) return done();
  done(
    httpError(
      'ERR_TICKWHEEL_UNSUPPORTED_MEDIA_TYPE',
      'a POST needs content-type: application/json, even with an empty body ' +
        '(so that a web page on another site cannot send it)',
    ),
  );
};
