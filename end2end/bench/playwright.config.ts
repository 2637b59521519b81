import { defineConfig } from '@playwright/test';
import base from '../playwright.config';
import { servers } from '../servers';

// The delivery benchmark (`make bench-ui`), not part of `make test`: the first visit to the
// dashboard over an emulated slow link, the site's files uncompressed and precompressed
// side by side in one run. It starts the consoles the suite does (../global-setup.ts),
// on a release build whose site has its .br and .gz copies.
export default defineConfig({
  ...base,
  testDir: '.',
  testMatch: '*.bench.ts',
  timeout: 600_000,
  globalSetup: '../global-setup.ts',
  projects: servers
    .filter((server) => server.javaScript)
    .map((server) => ({ name: server.project, use: { baseURL: server.baseURL, javaScriptEnabled: true } })),
});
