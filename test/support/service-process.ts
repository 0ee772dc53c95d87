import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SERVICE_NODE_FLAGS, withServiceMalloc } from '#libs/local-cluster';

/** Repository root, from the test's working directory. */
export const ROOT = process.cwd();

/**
 * A service's ready line (`evaluator evaluator-e2e ready (NATS ...)`), logged once it is up. Not
 * `/ready/`, which the earlier line naming `/readyz` matches before the service has connected.
 */
export const READY_LINE = /\bready\b/;

/** A service started from the compiled output, as `nest start <role>` would. */
export interface RunningService {
  child: ChildProcess;
  output: () => string;
  /** Resolves with the output once `pattern` appears (rejects on exit or after `timeoutMs`). */
  waitFor(pattern: RegExp, timeoutMs?: number): Promise<string>;
  /** Resolves with the exit code (or signal) once the process has exited. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/**
 * Starts `dist/services/<role>/main.js` with `env` added to this process's environment; `prefix`
 * words run before node (a wrapper such as `ip netns exec <ns>`, which execs node in place).
 */
export function startService(role: string, env: Record<string, string>, prefix: string[] = []): RunningService {
  const script = join(ROOT, 'dist', 'services', role, 'main.js');
  if (!existsSync(script)) throw new Error(`${script} is missing: run \`npm run build\` first`);
  const [command, ...args] = [...prefix, process.execPath, ...SERVICE_NODE_FLAGS, script];
  const child = spawn(command, args, {
    // Tests keep their data sets and outputs in temporary directories.
    env: withServiceMalloc({
      ...process.env,
      NO_COLOR: '1',
      TRIBUTARY_DATA_ROOT: tmpdir(),
      TRIBUTARY_OUTPUT_ROOT: tmpdir(),
      ...env,
    }),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  const listeners = new Set<() => void>();
  const onData = (b: Buffer) => {
    out += b.toString();
    for (const l of listeners) l();
  };
  child.stdout?.on('data', onData);
  child.stderr?.on('data', onData);
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => {
      for (const l of listeners) l();
      resolve({ code, signal });
    }),
  );
  return {
    child,
    output: () => out,
    exited,
    waitFor(pattern, timeoutMs = 30_000) {
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => {
          listeners.delete(check);
          reject(new Error(`timed out waiting for ${pattern} from ${role}; output:\n${out}`));
        }, timeoutMs);
        const check = () => {
          if (pattern.test(out)) {
            clearTimeout(timer);
            listeners.delete(check);
            resolve(out);
          } else if (child.exitCode !== null || child.signalCode !== null) {
            clearTimeout(timer);
            listeners.delete(check);
            reject(new Error(`${role} exited before ${pattern}; output:\n${out}`));
          }
        };
        listeners.add(check);
        check();
      });
    },
  };
}
