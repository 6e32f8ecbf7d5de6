#!/usr/bin/env node
/** The `tickwheel` executable (the package's bin). */

import { main } from './program.js';

const status = await main(process.argv);
if (status !== 0) process.exitCode = status;
