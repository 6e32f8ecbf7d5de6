/**
 * How tickwheel's browser tests and the dashboard screenshot start Debian's chromium through
 * playwright-core: headless, no sandbox (CI runs as root), and none of the background
 * networking that a machine without internet access would refuse many times a second.
 */

export const CHROMIUM = '/usr/bin/chromium';

export const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];
