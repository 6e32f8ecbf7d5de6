/**
 * The cluster's connection to Valkey/Redis: the connection of src/valkey with the tickwheel
 * Functions library (library.ts), which it loads on every primary when a node opens, and loads
 * again on a server found without it (restarted without its data, a replica promoted that never
 * had it) before it repeats the call.
 */

import { Valkey } from '../valkey/connection.js';
import { LIBRARY } from './library.js';

export class ClusterValkey extends Valkey {
  protected override readonly library = LIBRARY;
}
