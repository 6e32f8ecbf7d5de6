/** The connection of src/valkey with the tickwheel Functions library (library.ts). */

import { Valkey } from '../valkey/connection.js';
import { LIBRARY } from './library.js';

export class ClusterValkey extends Valkey {
  protected override readonly library = LIBRARY;
}
