// Idle detection on real TCP sockets (loopback), in Netty's IdleStateHandler terms.
//
// The server tracks each connection with one timer:
//   writer-idle after 100 ms without a write: it sends NOOP, so the client knows it is alive;
//   reader-idle after 300 ms without a read:  the client went quiet, the server hangs up.
// The client sends five messages 50 ms apart, then says nothing.
//
// Run: npm run build && node examples/idle-sockets.mjs

import { once } from 'node:events';
import { createConnection, createServer } from 'node:net';
import { IdleTracker } from 'tickwheel';

const idle = new IdleTracker({
  readerIdleMs: 300,
  writerIdleMs: 100,
  onIdle: (socket, state, periods, handle) => {
    if (state === 'writer-idle') {
      console.log(`server: nothing written for ${periods * 100} ms, sending NOOP`);
      socket.write('NOOP\n');
      idle.write(handle);
    } else if (state === 'reader-idle') {
      console.log('server: nothing read for 300 ms, closing the connection');
      idle.untrack(handle);
      socket.end();
    }
  },
});

const server = createServer((socket) => {
  const handle = idle.track(socket);
  socket.on('data', (chunk) => {
    idle.read(handle);
    socket.write(`ECHO ${chunk}`); // every write counts as writer activity
    idle.write(handle);
  });
  socket.on('close', () => idle.untrack(handle));
  socket.on('error', () => {}); // a peer may reset the connection; 'close' follows
});
server.listen(0, '127.0.0.1');
await once(server, 'listening');

const client = createConnection(server.address().port, '127.0.0.1');
await once(client, 'connect');
let noops = 0;
client.on('data', (chunk) => (noops += chunk.toString().split('NOOP').length - 1));
for (let i = 1; i <= 5; i++) {
  client.write(`message ${i}\n`);
  await new Promise((resolve) => setTimeout(resolve, 50));
}
console.log('client: sent 5 messages, now going quiet');
const quietSince = performance.now();
await once(client, 'end');
const quietFor = Math.round(performance.now() - quietSince);
console.log(`client: the server hung up after ~${Math.round(quietFor / 100) * 100} ms of silence`);
console.log(`client: received ${noops} NOOPs while quiet`);
client.end();
server.close();
idle.close();
