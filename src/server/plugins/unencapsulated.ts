/**
 * A plugin whose hooks, handlers, parsers and decorations apply to the instance that registers
 * it and to everything registered after it there, instead of to a context of its own. Fastify's
 * documented 'skip-override' property (docs/Reference/Plugins.md), which fastify-plugin sets:
 * fastify is a peer dependency of the server, so the server adds no other package for it.
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
