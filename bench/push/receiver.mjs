/**
 * A push receiver of the push benchmark, in a process of its own: a node:http server on a free
 * loopback port, forked by run.mjs.
 *
 *   node bench/push/receiver.mjs bare       reads the body and answers 204; checks nothing
 *   node bench/push/receiver.mjs listener   pushListener from tickwheel/client (dist.mjs): checks
 *                                           the signature (TICKWHEEL_BENCH_PUSH_SECRET),
 *                                           decodes the JSON, calls a handler, answers 204
 *
 * A delivery arrives when the request's headers are in (bare) or when the listener calls its
 * handler (listener: after the body was read and the signature checked). Requests: `cpu`,
 * `reset` (forget what arrived), `summary`.
 */

import { createServer } from 'node:http';
import { importDist } from './dist.mjs';
import { answerRequests, cpuSeconds } from './ipc.mjs';
import { Arrivals } from './arrivals.mjs';

const kind = process.argv[2];
const arrivals = new Arrivals();
let refused = 0;

async function listenerFor(kind) {
  if (kind === 'bare') {
    return (request, response) => {
      arrivals.add(
        request.headers['tickwheel-id'],
        Number(request.headers['tickwheel-deliver-at']),
      );
      request.on('end', () => response.writeHead(204).end());
      request.resume();
    };
  }
  if (kind === 'listener') {
    const { pushListener } = await importDist('client/index.js');
    const secret = process.env.TICKWHEEL_BENCH_PUSH_SECRET;
    const listener = pushListener({ secret }, (message) => {
      arrivals.add(message.id, message.deliverAt);
    });
    return (request, response) => {
      response.once('finish', () => {
        if (response.statusCode !== 204) refused++;
      });
      listener(request, response);
    };
  }
  throw new Error(`receiver kind must be bare or listener, got ${kind}`);
}

const server = createServer(await listenerFor(kind));
// Longer than any pause of the benchmark: a kept-alive connection the server closes just as
// the queue sends on it would fail that push, and its retry would wait out a backoff.
server.keepAliveTimeout = 120_000;
await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));

answerRequests(
  {
    cpu: () => cpuSeconds(),
    reset: () => {
      arrivals.reset();
      refused = 0;
    },
    summary: () => ({ ...arrivals.summary(), refused }),
  },
  { port: server.address().port },
);
