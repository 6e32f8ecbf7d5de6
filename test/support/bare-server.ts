/**
 * A bare HTTP server on a loopback port, for tests that play a peer gone wrong (silent, never
 * answering, never ending a line): its URL, and a close() that cuts every connection it holds.
 */

import { createServer, type RequestListener } from 'node:http';

export async function bareServer(
  handler: RequestListener,
): Promise<{ url: string; close(): Promise<void> }> {
  const server = createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as { port: number }).port}`,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
