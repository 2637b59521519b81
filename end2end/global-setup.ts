import { spawn, ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { binary, passwordVariable, servers, siteRoot } from './servers';

/**
 * Starts one console per project on a fresh SQLite database, reads the initial admin
 * password from its stderr (the first-start contract) and hands it to the tests.
 */
export default async function globalSetup(): Promise<() => Promise<void>> {
  if (!fs.existsSync(binary)) {
    throw new Error(`${binary} is missing: build with 'cargo leptos build' first (make test does)`);
  }
  const children: ChildProcess[] = [];
  const dirs: string[] = [];
  for (const server of servers) {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), `banlieue-e2e-${server.project}-`));
    dirs.push(dir);
    const child = spawn(binary, ['serve'], {
      env: {
        PATH: process.env.PATH,
        BANLIEUE_LISTEN: `127.0.0.1:${server.port}`,
        BANLIEUE_DATABASE_URL: `sqlite://${dir}/console.db`,
        // The dev cluster: the emulator with the chart and the demo pool, in the console.
        BANLIEUE_DEV_CLUSTER: 'true',
        BANLIEUE_DEV_CLUSTER_LISTEN: `127.0.0.1:${server.port + 1000}`,
        BANLIEUE_DEV_CLUSTER_DIR: `${dir}/cluster`,
        // An 8-second lifetime lets a test watch a sandbox expire.
        BANLIEUE_CLAIM_TTL_CHOICES: '8,900',
        LEPTOS_SITE_ROOT: siteRoot,
        RUST_LOG: 'warn',
      },
      stdio: ['ignore', 'inherit', 'pipe'],
    });
    children.push(child);
    process.env[passwordVariable(server.project)] = await initialPassword(child, server.project);
    await Promise.race([waitUntilReady(server.baseURL), exited(child, server.project)]);
  }
  return async () => {
    for (const child of children) child.kill('SIGTERM');
    await Promise.all(children.map((c) => new Promise((done) => c.once('exit', done))));
    for (const dir of dirs) fs.rmSync(dir, { recursive: true, force: true });
  };
}

function initialPassword(child: ChildProcess, project: string): Promise<string> {
  return new Promise((resolve, reject) => {
    let stderr = '';
    const timer = setTimeout(() => reject(new Error(`${project}: no admin password within 60 s: ${stderr}`)), 60_000);
    child.stderr!.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
      const match = /^initial admin password: (\S+)$/m.exec(stderr);
      if (match) {
        clearTimeout(timer);
        resolve(match[1]);
      }
    });
    child.once('exit', (code) => reject(new Error(`${project}: console exited with ${code}: ${stderr}`)));
  });
}

/** Rejects when the console stops before it is ready (a port in use, a bad setting). */
function exited(child: ChildProcess, project: string): Promise<never> {
  return new Promise((_, reject) => {
    child.once('exit', (code) => reject(new Error(`${project}: console exited with ${code} before it was ready`)));
  });
}

async function waitUntilReady(baseURL: string): Promise<void> {
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    try {
      if ((await fetch(`${baseURL}/readyz`)).ok) return;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`${baseURL} did not become ready`);
}
