/**
 * Bearer-token auth for /v1. Both tokens are hashed to 32 bytes before a constant-time compare,
 * so neither their content nor their length leaks through response timing.
 */

import { createHash, timingSafeEqual } from 'node:crypto';
import type { onRequestAsyncHookHandler, RouteOptions } from 'fastify';
import { invalidOption } from '../validate.js';
import { httpError } from './errors.js';
import { declareErrors } from './schemas/common.js';

/** The name of the bearer-token security scheme in /openapi.json. */
export const BEARER_SCHEME = 'bearerAuth';

/** Tokens travel in a header: printable ASCII without spaces. */
const TOKEN_PATTERN = /^[\x21-\x7e]+$/;

export function checkToken(token: unknown): string {
  if (typeof token !== 'string' || !TOKEN_PATTERN.test(token) || token.length > 4096) {
    throw invalidOption(
      'token must be 1-4096 printable ASCII characters without spaces (it is sent as "Authorization: Bearer <token>")',
    );
  }
  return token;
}

function digest(text: string): Buffer {
  return createHash('sha256').update(text).digest();
}

/** An onRequest hook that refuses requests without `Authorization: Bearer <token>`. */
export function bearerAuth(token: string): onRequestAsyncHookHandler {
  const expected = digest(token);
  return async (request, reply) => {
    const header = request.headers.authorization;
    if (typeof header !== 'string' || !/^bearer /i.test(header)) {
      void reply.header('www-authenticate', 'Bearer realm="tickwheel"');
      throw httpError(
        'ERR_TICKWHEEL_UNAUTHORIZED',
        'this server needs a token: send "Authorization: Bearer <token>"',
      );
    }
    if (!timingSafeEqual(digest(header.slice(7).trim()), expected)) {
      void reply.header('www-authenticate', 'Bearer realm="tickwheel", error="invalid_token"');
      throw httpError('ERR_TICKWHEEL_UNAUTHORIZED', 'the bearer token is not valid');
    }
  };
}

/** An onRoute hook: the routes behind bearerAuth() need the token and may answer 401. */
export function requireToken(route: RouteOptions): void {
  declareErrors([401])(route);
  route.schema = { ...route.schema, security: [{ [BEARER_SCHEME]: [] }] } as RouteOptions['schema'];
}
