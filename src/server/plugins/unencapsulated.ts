/**
 * A plugin whose hooks, handlers and decorations apply to the instance that registers it, not
 * to a context of its own: Fastify's documented 'skip-override' property, which fastify-plugin
 * sets (fastify is a peer dependency; the server adds no other package for it).
 */

import type { FastifyPluginAsync } from 'fastify';

export function unencapsulated<Options extends object>(
  name: string,
  plugin: FastifyPluginAsync<Options>,
): FastifyPluginAsync<Options> {
  Object.assign(plugin, {
    [Symbol.for('skip-override')]: true,
    [Symbol.for('fastify.display-name')]: name,
  });
  return plugin;
}
