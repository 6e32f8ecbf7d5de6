/** The short form of log lines for people at a terminal (src/cli/pretty-log.ts). */

import { describe, expect, it } from 'vitest';
import { prettyLine } from '../../src/cli/pretty-log.js';

const at = new Date(2026, 10, 29, 14, 56, 12, 31).getTime();

describe('prettyLine', () => {
  it('shows the local time, the level and the message, then the other fields', () => {
    const line = JSON.stringify({
      level: 30,
      time: at,
      pid: 1,
      hostname: 'h',
      url: 'http://127.0.0.1:7700',
      msg: 'tickwheel listening on http://127.0.0.1:7700',
    });
    expect(prettyLine(`${line}\n`)).toBe(
      '14:56:12.031 INFO  tickwheel listening on http://127.0.0.1:7700 url=http://127.0.0.1:7700\n',
    );
  });

  it('shows a fault with its code', () => {
    const line = JSON.stringify({
      level: 40,
      time: at,
      dir: '/data',
      part: 'index',
      errno: 'ENOSPC',
      code: 'ERR_TICKWHEEL_IO',
      msg: 'writing the schedule index in /data fails',
    });
    expect(prettyLine(line)).toBe(
      '14:56:12.031 WARN  writing the schedule index in /data fails [ERR_TICKWHEEL_IO] dir=/data part=index errno=ENOSPC\n',
    );
  });

  it('shows a request as method, path, status and time', () => {
    const line = JSON.stringify({
      level: 30,
      time: at,
      reqId: 'req-1',
      req: { method: 'GET', url: '/v1/stats', remoteAddress: '127.0.0.1' },
      res: { statusCode: 200 },
      responseTime: 1.4,
      msg: 'request completed',
    });
    expect(prettyLine(line)).toBe('14:56:12.031 INFO  GET /v1/stats 200 1.4ms\n');
  });

  it("shows an error's message, quotes values with spaces and cuts long ones", () => {
    const line = JSON.stringify({
      level: 50,
      time: at,
      err: { type: 'Error', message: 'boom', stack: 'Error: boom\n    at x' },
      reason: 'two words',
      big: 'x'.repeat(500),
      msg: 'request failed',
    });
    const shown = prettyLine(line);
    expect(shown).toMatch(
      /^14:56:12\.031 ERROR request failed reason="two words" big=x{199}… error: boom\n$/,
    );
  });

  it('passes on a line that is not a JSON object as it is', () => {
    expect(prettyLine('plain text')).toBe('plain text\n');
    expect(prettyLine('[1,2]\n')).toBe('[1,2]\n');
  });
});
