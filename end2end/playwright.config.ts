import { defineConfig } from '@playwright/test';
import { servers } from './servers';

// Each project gets its own console (own database, own first admin), so the JavaScript
// and no-JavaScript runs can both walk the first-admin flow. Tests in a project run in
// file order: they follow one person's journey.
export default defineConfig({
  testDir: './tests',
  fullyParallel: false,
  workers: 1,
  retries: 0,
  timeout: 30_000,
  reporter: [['list']],
  globalSetup: './global-setup.ts',
  use: {
    browserName: 'chromium',
    launchOptions: {
      executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium',
      args: [
        '--headless',
        '--no-sandbox',
        '--disable-gpu',
        '--disable-quic',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
        '--no-first-run',
      ],
    },
    locale: 'en-US',
  },
  projects: servers.map((server) => ({
    name: server.project,
    use: { baseURL: server.baseURL, javaScriptEnabled: server.javaScript },
  })),
});
