/**
 * Who may call the server. Two plugins, one per scope:
 *
 *   hostAccess   every route: Host names the server does not answer to get 421 (origin.ts),
 *                token or not, before anything else looks at the request;
 *   apiAccess    the /v1 routes: the bearer token when there is one (401, auth.ts), and no POST
 *                a web page could send without a preflight (415).
 *
 * Hooks are callback-style where they can be: they run on every request, and an async hook
 * costs a promise each.
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
    app.addHook('onRoute', declareErrors([421]));
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
