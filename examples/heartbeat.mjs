// Heartbeats over real TCP sockets (loopback): the server sends PING to a client it has not
// heard from for 100 ms, and gives up on one that leaves 3 PINGs in a row unanswered (Dubbo's
// default), 400 ms after it last heard from it. Alice answers every PING; Bob hangs.
//
// Run: npm run build && node examples/heartbeat.mjs

import { once } from 'node:events';
import { createConnection, createServer } from 'node:net';
import { Heartbeat } from 'tickwheel';

const heartbeat = new Heartbeat({
  intervalMs: 100,
  maxMissed: 3,
  send: (socket, attempt) => {
    if (socket.name === 'bob') console.log(`server: bob is quiet, PING #${attempt}`);
    socket.write('PING\n');
  },
  onDead: (socket) => {
    console.log(`server: ${socket.name} left 3 PINGs unanswered, closing`);
    socket.destroy();
  },
});

const server = createServer((socket) => {
  const handle = heartbeat.track(socket);
  socket.on('data', (chunk) => {
    heartbeat.received(handle); // anything from the peer counts: data or PONG
    const hello = /HELLO (\w+)/.exec(chunk.toString());
    if (hello) socket.name = hello[1];
  });
  socket.on('close', () => heartbeat.untrack(handle));
  socket.on('error', () => {}); // a peer may reset the connection; 'close' follows
});
server.listen(0, '127.0.0.1');
await once(server, 'listening');
const { port } = server.address();

async function client(name, answers) {
  const socket = createConnection(port, '127.0.0.1');
  await once(socket, 'connect');
  socket.write(`HELLO ${name}\n`);
  let pings = 0;
  socket.on('data', (chunk) => {
    const count = chunk.toString().split('PING').length - 1;
    pings += count;
    if (answers && socket.writable) for (let i = 0; i < count; i++) socket.write('PONG\n');
  });
  return { socket, pings: () => pings };
}

const alice = await client('alice', true);
const bob = await client('bob', false);
console.log('alice: connected, answers every PING');
console.log('bob: connected, never answers');

const bobSince = performance.now();
await once(bob.socket, 'close');
console.log(
  `bob: disconnected by the server after ~${Math.round((performance.now() - bobSince) / 100) * 100} ms`,
);
console.log(
  `alice: answered ${alice.pings()} PINGs meanwhile, still connected: ${!alice.socket.destroyed}`,
);

alice.socket.end();
server.close();
heartbeat.close();
