import { defineConfig } from '@playwright/test';
import { servers } from './servers';

// Each project gets its own console (own database, own first admin, own dev cluster).
// Spec files run side by side (BANLIEUE_E2E_WORKERS, default 2), each alone as well: a
// file makes the people it needs (fixtures.ts, makePerson), signs the first admin in
// with whichever password the suite has set (signInAsAdmin), and console.spec.ts walks
// the first-admin flow on a console of its own. Tests in a file run in order: they
// follow one person's journey.
export default defineConfig({
  testDir: './tests',
  fullyParallel: false,
  workers: Number(process.env.BANLIEUE_E2E_WORKERS ?? 2),
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
