/**
 * Who may call the server: hostAccess (every route: unknown Host names get 421, token or not)
 * and apiAccess (/v1: the bearer token, 401; no POST a web page could send without a preflight,
 * 415). Hooks are callback-style where they can be: an async hook costs a promise per request.
 */

import { bearerAuth, requireToken } from '../auth.js';
import { hostCheck, jsonPostsOnly } from '../origin.js';
import { declareErrors } from '../schemas/common.js';
import { unencapsulated } from './unencapsulated.js';

export const hostAccess = unencapsulated<{ allowedHosts: readonly string[]; token?: string }>(
  'tickwheel-host-access',
  async (app, { allowedHosts, token }) => {
    app.decorate('tokenRequired', token !== undefined);
    app.addHook('onRequest', hostCheck(allowedHosts));
    app.addHook('onRoute', declareErrors([400, 421]));
  },
);

export const apiAccess = unencapsulated<{ token?: string }>(
  'tickwheel-api-access',
  async (app, { token }) => {
    if (token !== undefined) {
      app.addHook('onRequest', bearerAuth(token));
      app.addHook('onRoute', requireToken);
    }
    app.addHook('onRequest', jsonPostsOnly);
  },
);
