/**
 * A TCP relay on a loopback port for tests and harnesses: what a virtual IP or a proxy in front
 * of a database is. Each connection it accepts is relayed to `127.0.0.1:<target>`.
 *
 *   const relay = await startRelay(5432);
 *   relay.retarget(5433);   // a failover: open connections cut, new ones go to 5433
 *   relay.silence();        // a dead host: nothing forwarded, nothing answered, nothing closed
 *   relay.close();
 *
 * Nothing here is shipped.
 */

import { Socket, createServer } from 'node:net';

export async function startRelay(target) {
  let port = target;
  let silent = false;
  const sockets = new Set();
  const track = (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => socket.destroy());
  };
  const server = createServer((inbound) => {
    track(inbound);
    if (silent) return;
    const outbound = new Socket();
    track(outbound);
    outbound.connect(port, '127.0.0.1');
    inbound.on('data', (chunk) => !silent && outbound.write(chunk));
    outbound.on('data', (chunk) => !silent && inbound.write(chunk));
    inbound.on('close', () => outbound.destroy());
    outbound.on('close', () => inbound.destroy());
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: server.address().port,
    /** From now on to `next`; every open connection is cut (as a moved virtual IP does). */
    retarget(next) {
      port = next;
      for (const socket of sockets) socket.destroy();
    },
    silence() {
      silent = true;
    },
    close() {
      for (const socket of sockets) socket.destroy();
      server.close();
    },
  };
}
