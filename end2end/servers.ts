import path from 'node:path';

/** One console per Playwright project. */
export interface ConsoleServer {
  project: string;
  baseURL: string;
  port: number;
  javaScript: boolean;
}

export const servers: ConsoleServer[] = [
  { project: 'js', port: 3101, baseURL: 'http://127.0.0.1:3101', javaScript: true },
  { project: 'no-js', port: 3102, baseURL: 'http://127.0.0.1:3102', javaScript: false },
];

const root = path.resolve(__dirname, '..');
export const binary =
  process.env.BANLIEUE_BIN ??
  path.join(process.env.CARGO_TARGET_DIR ?? path.join(root, 'target'), 'debug', 'banlieue-console');
export const siteRoot = path.join(root, 'target', 'site');

/** The environment variable carrying a project's initial admin password to the tests. */
export const passwordVariable = (project: string) =>
  `BANLIEUE_E2E_ADMIN_PASSWORD_${project.replace(/\W/g, '_').toUpperCase()}`;
