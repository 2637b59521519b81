import { ConsoleProcess, startConsole } from './console-process';
import { passwordVariable, servers } from './servers';

/**
 * Starts one console per project, each with its dev cluster, and hands each one's
 * initial admin password to the tests.
 */
export default async function globalSetup(): Promise<() => Promise<void>> {
  const started: ConsoleProcess[] = [];
  const stopAll = async () => {
    await Promise.all(started.map((one) => one.stop()));
  };
  try {
    for (const server of servers) {
      const one = await startConsole(server.project, server.port, true);
      started.push(one);
      process.env[passwordVariable(server.project)] = one.initialPassword;
    }
  } catch (error) {
    await stopAll();
    throw error;
  }
  return stopAll;
}
