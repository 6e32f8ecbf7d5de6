import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { CLUSTER_PEER, REDIS_IDEMPOTENCY_STORE, checkClusterPeer } from '../../src/valkey/peer.js';
import { TickwheelDependencyError } from '../../src/errors.js';
import { PG_PEER } from '../../src/postgres/pg.js';
import { TRACING_PEER } from '../../src/queue/tracing.js';
import { checkServerPeers, missingServerPeers, SERVER_PEERS } from '../../src/server/peers.js';

const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8'));

describe("the server's optional peer dependencies", () => {
  it('are the peerDependencies of package.json, optional, and installed for development', () => {
    // The server's, the cluster's client, PostgreSQL's client, OpenTelemetry's API for tracing, and a bound on fastify's light-my-request, whose 6.8
    // needs Node 22 (an engine warning on Node 20: test/package/engines.test.ts).
    expect(pkg.peerDependencies).toEqual({
      ...SERVER_PEERS,
      [CLUSTER_PEER.name]: CLUSTER_PEER.range,
      [PG_PEER.name]: PG_PEER.range,
      [TRACING_PEER.name]: TRACING_PEER.range,
      'light-my-request': '>=6.0.0 <6.8.0',
    });
    expect(pkg.peerDependenciesMeta[TRACING_PEER.name]).toEqual({ optional: true });
    expect(pkg.peerDependenciesMeta['light-my-request']).toEqual({ optional: true });
    expect(pkg.peerDependenciesMeta[CLUSTER_PEER.name]).toEqual({ optional: true });
    expect(pkg.peerDependenciesMeta[PG_PEER.name]).toEqual({ optional: true });
    expect(pkg.devDependencies[CLUSTER_PEER.name]).toBe(CLUSTER_PEER.range);
    for (const name of Object.keys(SERVER_PEERS)) {
      expect(pkg.peerDependenciesMeta[name]).toEqual({ optional: true });
      expect(pkg.devDependencies[name]).toBe(SERVER_PEERS[name]);
      expect(pkg.dependencies[name]).toBeUndefined();
    }
  });

  it('are found here, where the repository installs them', () => {
    expect(missingServerPeers()).toEqual([]);
    expect(() => checkServerPeers()).not.toThrow();
  });

  it('when missing, are named with the command that installs them', () => {
    const missing = missingServerPeers(() => {
      throw Object.assign(new Error('not found'), { code: 'MODULE_NOT_FOUND' });
    });
    expect(missing).toEqual(['fastify', 'prom-client']);
    const both = (() => {
      try {
        checkServerPeers(missing);
      } catch (err) {
        return err;
      }
    })() as TickwheelDependencyError;
    expect(both).toBeInstanceOf(TickwheelDependencyError);
    expect(both).toMatchObject({
      name: 'TickwheelDependencyError',
      code: 'ERR_TICKWHEEL_MISSING_DEPENDENCY',
      missing: ['fastify', 'prom-client'],
      install: 'npm install fastify@5 prom-client@15',
    });
    expect(both.message).toContain('needs fastify and prom-client');
    expect(both.message).toContain('`npm install fastify@5 prom-client@15`');

    expect(() => checkServerPeers(['prom-client'])).toThrow(
      /needs prom-client, an optional peer dependency of tickwheel that is not installed: run `npm install prom-client@15`/,
    );
  });

  it('for a queue on Valkey/Redis, @redis/client: when missing, named with its install command', () => {
    expect(() => checkClusterPeer()).not.toThrow();
    let caught: unknown;
    try {
      checkClusterPeer(undefined, () => {
        throw Object.assign(new Error('not found'), { code: 'MODULE_NOT_FOUND' });
      });
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(TickwheelDependencyError);
    expect(caught).toMatchObject({
      code: 'ERR_TICKWHEEL_MISSING_DEPENDENCY',
      missing: ['@redis/client'],
      install: 'npm install @redis/client@6',
    });
    expect((caught as Error).message).toMatch(/^a queue on Valkey\/Redis \(the redis option/);
    expect(() => checkClusterPeer(REDIS_IDEMPOTENCY_STORE, () => undefined)).not.toThrow();
  });
});
