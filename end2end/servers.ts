import path from 'node:path';

/** One console per Playwright project. */
export interface ConsoleServer {
  project: string;
  baseURL: string;
  port: number;
  javaScript: boolean;
}

/** First of the two loopback ports; `BANLIEUE_E2E_PORT` moves them (e.g. beside a CI run). */
const firstPort = Number(process.env.BANLIEUE_E2E_PORT ?? 3101);

/** The port of the console of a spec file's own started by worker `parallelIndex` (see
 *  fixtures.ts, `ownConsole`): after the projects' two, one per worker. */
export const ownConsolePort = (parallelIndex: number) => firstPort + 10 + parallelIndex;

export const servers: ConsoleServer[] = [
  { project: 'js', port: firstPort, baseURL: `http://127.0.0.1:${firstPort}`, javaScript: true },
  { project: 'no-js', port: firstPort + 1, baseURL: `http://127.0.0.1:${firstPort + 1}`, javaScript: false },
];

const root = path.resolve(__dirname, '..');
export const binary =
  process.env.BANLIEUE_BIN ??
  path.join(process.env.CARGO_TARGET_DIR ?? path.join(root, 'target'), 'debug', 'banlieue-console');
/** The site cargo-leptos builds (`site-root`); `BANLIEUE_E2E_SITE_ROOT` names another. */
export const siteRoot = process.env.BANLIEUE_E2E_SITE_ROOT ?? path.join(root, 'target', 'site');

/** The environment variable carrying a project's initial admin password to the tests. */
export const passwordVariable = (project: string) =>
  `BANLIEUE_E2E_ADMIN_PASSWORD_${project.replace(/\W/g, '_').toUpperCase()}`;
