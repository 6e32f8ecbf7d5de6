// Builds the web dashboard into dist/dashboard/, which the server serves at / (see
// src/server/dashboard.ts). Preact's JSX goes through esbuild directly: no plugin needed.
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';

export default defineConfig({
  root: fileURLToPath(new URL('.', import.meta.url)),
  base: '/',
  esbuild: { jsx: 'automatic', jsxImportSource: 'preact' },
  build: {
    outDir: fileURLToPath(new URL('../dist/dashboard', import.meta.url)),
    emptyOutDir: true,
    target: 'es2022',
    sourcemap: false,
  },
  server: {
    // `vite --config dashboard/vite.config.ts` against a `tickwheel serve` on the default port.
    proxy: { '/v1': 'http://127.0.0.1:7700' },
  },
});
