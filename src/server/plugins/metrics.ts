/** Request metrics: every answer by method, route and status, with its duration. */

import type { ServerMetrics } from '../metrics.js';
import { unencapsulated } from './unencapsulated.js';

export const requestMetrics = unencapsulated<{ metrics: ServerMetrics }>(
  'tickwheel-request-metrics',
  async (app, { metrics }) => {
    app.addHook('onResponse', (request, reply, done) => {
      metrics.observeAnswer(request, reply);
      done();
    });
  },
);
