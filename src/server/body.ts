/**
 * The one body parser: `application/json` in UTF-8, else 415; an empty body is no body. Refused with 400,
 * naming the path: malformed JSON, keys that pollute prototypes (`__proto__`, `constructor`
 * holding `prototype`), numbers beyond a double. The value is walked only when the text could
 * hold such a key or number, so an ordinary body costs one regular expression scan.
 */

import type { FastifyInstance } from 'fastify';
import { httpError, invalidRequest, JSON_BODIES_ONLY } from './errors.js';

/** Text that may spell a risky key (also through \u escapes) or overflow a double. */
const MAY_NEED_WALK = /__proto__|constructor|\\u|\d{20}|[eE]\+?\d{3}/;

interface Step {
  value: unknown;
  path: string;
}

/** A path for an error message: a deeply nested one is cut in the middle. */
function shown(path: string): string {
  return path.length <= 200 ? path : `${path.slice(0, 100)}...${path.slice(-80)}`;
}

/** The first problem in a parsed body, as an error message; undefined when there is none. */
function unsafeContent(root: unknown): string | undefined {
  const stack: Step[] = [{ value: root, path: 'body' }];
  while (stack.length > 0) {
    const { value, path } = stack.pop() as Step;
    if (typeof value === 'number') {
      if (!Number.isFinite(value)) {
        return `${shown(path)} is a number too large to be represented (it would become Infinity); send it as a string`;
      }
      continue;
    }
    if (typeof value !== 'object' || value === null) continue;
    // Arrays (index keys only) pass both key checks.
    if (Object.hasOwn(value, '__proto__')) {
      return `${shown(path)} has a "__proto__" key, which the server refuses: it can change object prototypes in code that merges it`;
    }
    const ctor = (value as Record<string, unknown>).constructor;
    if (
      Object.hasOwn(value, 'constructor') &&
      typeof ctor === 'object' &&
      ctor !== null &&
      Object.hasOwn(ctor, 'prototype')
    ) {
      return `${shown(path)} has a "constructor" key holding "prototype", which the server refuses: it can change object prototypes in code that merges it`;
    }
    // Pushed last first, so that the first problem in document order is the one reported.
    const entries = Object.entries(value);
    for (let i = entries.length - 1; i >= 0; i--) {
      stack.push({ value: entries[i][1], path: `${path}/${entries[i][0]}` });
    }
  }
  return undefined;
}

/** `charset=...` of a content type, lower-cased and unquoted; undefined when it names none. */
function charsetOf(contentType: string | undefined): string | undefined {
  const match = /;\s*charset\s*=\s*("([^"]*)"|[^;\s]*)/i.exec(contentType ?? '');
  return match === null ? undefined : (match[2] ?? match[1]).toLowerCase();
}

function parseJsonBody(text: string): unknown {
  if (text.trim() === '') return undefined;
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw invalidRequest(`the body is not valid JSON: ${(err as Error).message}`);
  }
  if (MAY_NEED_WALK.test(text)) {
    const problem = unsafeContent(value);
    if (problem !== undefined) throw invalidRequest(problem);
  }
  return value;
}

/** Replaces Fastify's parsers; an empty body of another type is no body, a non-empty one a 415. */
const UTF8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

export function jsonBodies(app: FastifyInstance): void {
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'string' }, (_request, body, done) => {
    if (body.length === 0) return done(null, undefined);
    done(httpError('ERR_TICKWHEEL_UNSUPPORTED_MEDIA_TYPE', JSON_BODIES_ONLY), undefined);
  });
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (request, body, done) => {
    // The body is read as UTF-8 (JSON's only encoding between systems, RFC 8259): one sent in
    // another would be read as other text than was meant.
    const charset = charsetOf(request.headers['content-type']);
    if (charset !== undefined && charset !== 'utf-8' && charset !== 'utf8') {
      const refusal = `the body's charset "${charset.slice(0, 40)}" is not supported: send JSON in UTF-8`;
      return done(httpError('ERR_TICKWHEEL_UNSUPPORTED_MEDIA_TYPE', refusal), undefined);
    }
    let text: string;
    try {
      // Fatal: bytes that are not UTF-8 are refused, not read as U+FFFD into the payload.
      text = typeof body === 'string' ? body : UTF8.decode(body);
    } catch {
      return done(invalidRequest('the body is not valid UTF-8: send JSON in UTF-8'), undefined);
    }
    try {
      done(null, parseJsonBody(text));
    } catch (err) {
      done(err as Error, undefined);
    }
  });
}
