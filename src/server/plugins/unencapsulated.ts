/**
 * A plugin whose hooks and decorations apply to the instance that registers it: Fastify's
 * documented 'skip-override', as fastify-plugin sets it (the server adds no package for it).
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
