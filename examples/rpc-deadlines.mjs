// Request deadlines for a small JSON-lines RPC over real TCP (loopback).
//
// The client keeps its in-flight calls in a DeadlineRegistry: each call registers its id with
// a deadline and gets a promise; the reply with that id resolves it. A call that gets no reply
// in time rejects with a TimeoutError, and its late reply is dropped. An AbortSignal cancels a
// call. withDeadline() puts a deadline on any promise, and can abort the work it waits for.
//
// Run: npm run build && node examples/rpc-deadlines.mjs

import { once } from 'node:events';
import { createConnection, createServer } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { DeadlineRegistry, withDeadline } from 'tickwheel';

// The server: `add` answers at once, `slow` after 300 ms.
const server = createServer((socket) => {
  lines(socket, ({ id, method, params }) => {
    const reply = () => socket.write(`${JSON.stringify({ id, result: run(method, params) })}\n`);
    if (method === 'slow') setTimeout(reply, 300);
    else reply();
  });
});
const run = (method, params) => (method === 'add' ? params[0] + params[1] : 'done, slowly');
server.listen(0, '127.0.0.1');
await once(server, 'listening');

// The client.
const socket = createConnection(server.address().port, '127.0.0.1');
await once(socket, 'connect');
const calls = new DeadlineRegistry();
let nextId = 0;
lines(socket, ({ id, result }) => {
  if (!calls.resolve(id, result)) console.log(`client: late reply to call ${id} dropped`);
});

function call(method, params = [], { timeoutMs = 1_000, signal } = {}) {
  const id = nextId++;
  const reply = calls.register(id, timeoutMs, { signal });
  socket.write(`${JSON.stringify({ id, method, params })}\n`);
  return reply;
}

console.log(`add(2, 3) = ${await call('add', [2, 3])}`);

try {
  await call('slow', [], { timeoutMs: 100 });
} catch (err) {
  console.log(`slow() failed: ${err.name} ${err.code}: ${err.message}`);
}

const cancel = new AbortController();
const cancelled = call('slow', [], { signal: cancel.signal });
cancel.abort('user pressed cancel');
try {
  await cancelled;
} catch (err) {
  console.log(`slow() cancelled: ${err.name} (${err.cause})`);
}

// Any promise, with a deadline; the work gets a signal that aborts when time is up.
try {
  await withDeadline((signal) => sleep(5_000, 'never', { signal }), 50);
} catch (err) {
  console.log(`withDeadline: ${err.name}: ${err.message}`);
}

await sleep(400); // let the slow replies arrive, and be dropped
console.log(`client: ${calls.size} calls in flight`);
socket.destroy();
server.close();
calls.close();

/** Calls `onMessage` with each JSON line that arrives on `stream`. */
function lines(stream, onMessage) {
  let buffered = '';
  stream.on('data', (chunk) => {
    buffered += chunk;
    for (let newline; (newline = buffered.indexOf('\n')) >= 0;) {
      onMessage(JSON.parse(buffered.slice(0, newline)));
      buffered = buffered.slice(newline + 1);
    }
  });
  stream.on('error', () => {});
}
