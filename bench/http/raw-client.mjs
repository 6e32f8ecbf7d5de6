/**
 * A bare load generator on node:http with a keep-alive agent, standing in for autocannon: it
 * does as little as a client can per request, so that the phase that uses it measures the
 * server rather than the client SDK (whose fetch costs several times more CPU per request).
 */

import { Buffer } from 'node:buffer';
import http from 'node:http';
import { URL } from 'node:url';

export function rawClient(base, connections) {
  const url = new URL(base);
  const agent = new http.Agent({ keepAlive: true, maxSockets: connections });
  return {
    post(path, body) {
      const text = JSON.stringify(body);
      return new Promise((resolve, reject) => {
        const request = http.request(
          {
            agent,
            host: url.hostname,
            port: url.port,
            method: 'POST',
            path,
            headers: {
              'content-type': 'application/json',
              'content-length': Buffer.byteLength(text),
            },
          },
          (response) => {
            let answer = '';
            response.setEncoding('utf8');
            response.on('data', (chunk) => (answer += chunk));
            response.on('end', () => {
              if (response.statusCode >= 300) {
                reject(new Error(`HTTP ${response.statusCode}: ${answer.slice(0, 200)}`));
              } else {
                resolve(JSON.parse(answer));
              }
            });
          },
        );
        request.on('error', reject);
        request.end(text);
      });
    },
    close() {
      agent.destroy();
    },
  };
}
