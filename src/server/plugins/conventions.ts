/**
 * The API's conventions: one error format, JSON bodies only, an absent optional body read as
 * `{}`, and in each route's schema the errors from around its handler. Registered first, so
 * that every route is declared with these errors.
 */

import { jsonBodies } from '../body.js';
import { handleError, handleNotFound } from '../errors.js';
import {
  declareErrors,
  ERROR_SCHEMA,
  hasPathParams,
  readsBody,
  validatesInput,
} from '../schemas/common.js';
import { unencapsulated } from './unencapsulated.js';

export const apiConventions = unencapsulated('tickwheel-conventions', async (app) => {
  app.addSchema(ERROR_SCHEMA);
  app.setErrorHandler(handleError);
  app.setNotFoundHandler(handleNotFound);
  app.addHook('onRoute', declareErrors([500]));
  app.addHook('onRoute', declareErrors([400, 414], hasPathParams));
  jsonBodies(app);
  // jsonPostsOnly's 415 on /v1 is one of these too.
  app.addHook('onRoute', declareErrors([400, 413, 415], readsBody));
  app.addHook('onRoute', declareErrors([400], validatesInput));
  // Routes whose body is optional (receive, requeue, ...) accept a request without one.
  app.addHook('preValidation', (request, _reply, done) => {
    if (request.body === undefined) request.body = {};
    done();
  });
});
