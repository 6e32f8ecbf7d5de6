/**
 * The client commands against something on --url that is not a tickwheel server: one line
 * saying so (ERR_TICKWHEEL_HTTP), never "no message with id" or a raw TypeError.
 */

import { afterEach, describe, expect, it } from 'vitest';
import type { CliIo } from '../../src/cli/io.js';
import { main } from '../../src/cli/program.js';
import { bareServer } from '../support/bare-server.js';

async function run(args: string[]) {
  let out = '';
  let err = '';
  const io: CliIo = {
    out: (text) => void (out += text),
    err: (text) => void (err += text),
    readStdin: async () => '',
  };
  const code = await main(['node', 'tickwheel', ...args], io, {});
  return { code, stdout: out, stderr: err };
}

const closers: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const close of closers.splice(0)) await close();
});

async function serving(status: number, type: string, body: string): Promise<string> {
  const server = await bareServer((_req, res) => {
    res.writeHead(status, { 'content-type': type }).end(body);
  });
  closers.push(() => server.close());
  return server.url;
}

describe('client commands against a server that is not tickwheel', () => {
  it('a 404 page is not taken for an unknown id', async () => {
    const url = await serving(404, 'text/html', '<html>not found</html>');
    for (const args of [
      ['get', 'x'],
      ['cancel', 'x'],
      ['reschedule', 'x', '--delay', '1s'],
    ]) {
      const result = await run([...args, '--url', url]);
      expect(result.code).toBe(1);
      expect(result.stderr).toMatch(
        /^tickwheel: .*HTTP 404 from something that is not a tickwheel server.*\(ERR_TICKWHEEL_HTTP, HTTP 404\)\n$/,
      );
    }
  });

  it('JSON of another shape is refused in one line', async () => {
    const url = await serving(200, 'application/json', '{"messages":5}');
    for (const args of [['list', 'emails'], ['get', 'x'], ['dead', 'emails'], ['stats']]) {
      const result = await run([...args, '--url', url]);
      expect(result).toMatchObject({ code: 1, stdout: '' });
      expect(result.stderr).toMatch(/not a tickwheel server.*\(ERR_TICKWHEEL_HTTP, HTTP 200\)\n$/);
    }
  });
});
