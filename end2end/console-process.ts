import { spawn, ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { binary, siteRoot } from './servers';

/** A console process on a fresh SQLite database, and its first admin's password. */
export interface ConsoleProcess {
  baseURL: string;
  initialPassword: string;
  /** Stops the console and removes its database. */
  stop(): Promise<void>;
}

/**
 * Starts `banlieue-console serve` on 127.0.0.1:`port` with a database of its own, reads
 * the initial admin password from its stderr (the first-start contract) and waits until
 * it is ready. With `devCluster`, the console runs the Kubernetes emulator with the
 * chart and the demo pool on `port + 1000`.
 */
export async function startConsole(name: string, port: number, devCluster: boolean): Promise<ConsoleProcess> {
  if (!fs.existsSync(binary)) {
    throw new Error(`${binary} is missing: build with 'cargo leptos build' first (make test does)`);
  }
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `banlieue-e2e-${name}-`));
  const cluster: Record<string, string> = devCluster
    ? {
        BANLIEUE_DEV_CLUSTER: 'true',
        BANLIEUE_DEV_CLUSTER_LISTEN: `127.0.0.1:${port + 1000}`,
        BANLIEUE_DEV_CLUSTER_DIR: `${dir}/cluster`,
        // An 8-second lifetime lets a test watch a sandbox expire.
        BANLIEUE_CLAIM_TTL_CHOICES: '8,900',
      }
    : {};
  const child = spawn(binary, ['serve'], {
    env: {
      PATH: process.env.PATH,
      BANLIEUE_LISTEN: `127.0.0.1:${port}`,
      BANLIEUE_DATABASE_URL: `sqlite://${dir}/console.db`,
      ...cluster,
      LEPTOS_SITE_ROOT: siteRoot,
      RUST_LOG: 'warn',
    },
    stdio: ['ignore', 'inherit', 'pipe'],
  });
  const baseURL = `http://127.0.0.1:${port}`;
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((done) => child.once('exit', done));
      child.kill('SIGTERM');
      await exited;
    }
    fs.rmSync(dir, { recursive: true, force: true });
  };
  try {
    const initialPassword = await firstAdminPassword(child, name);
    await Promise.race([waitUntilReady(baseURL), exited(child, name)]);
    return { baseURL, initialPassword, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}

function firstAdminPassword(child: ChildProcess, name: string): Promise<string> {
  return new Promise((resolve, reject) => {
    let stderr = '';
    const timer = setTimeout(() => reject(new Error(`${name}: no admin password within 60 s: ${stderr}`)), 60_000);
    child.stderr!.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
      const match = /^initial admin password: (\S+)$/m.exec(stderr);
      if (match) {
        clearTimeout(timer);
        resolve(match[1]);
      }
    });
    child.once('exit', (code) => reject(new Error(`${name}: console exited with ${code}: ${stderr}`)));
  });
}

/** Rejects when the console stops before it is ready (a port in use, a bad setting). */
function exited(child: ChildProcess, name: string): Promise<never> {
  return new Promise((_, reject) => {
    child.once('exit', (code) => reject(new Error(`${name}: console exited with ${code} before it was ready`)));
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
