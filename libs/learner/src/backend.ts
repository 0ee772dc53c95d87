import * as tf from '@tensorflow/tfjs';
import { availableParallelism } from 'node:os';
import { createRequire } from 'node:module';
import { dirname, sep } from 'node:path';
import { BackendUnavailableError } from './errors.js';
import { chooseKernelPath, type KernelPath, type KernelPathInfo } from './kernels/kernel-path.js';
import { registerWasmKernels } from './kernels/register.js';
import type { WasmHeapBackend } from './kernels/wasm-heap.js';

/** Environment variable that forces one backend: `tensorflow`, `wasm` or `cpu`. */
export const BACKEND_ENV_VAR = 'TRIBUTARY_BACKEND';

/** Backends a caller may ask for; `tensorflow` means tfjs-node-gpu, else tfjs-node. */
export const BACKEND_CHOICES = ['tensorflow', 'wasm', 'cpu'] as const;

/** One of {@link BACKEND_CHOICES}. */
export type BackendChoice = (typeof BACKEND_CHOICES)[number];

/** What kind of compute the selected backend runs on. */
export type BackendKind = 'gpu' | 'native' | 'wasm-simd' | 'wasm' | 'cpu';

/** The backend a process trains with, for the caller to log. */
export interface BackendInfo {
  /** TensorFlow.js backend name: `tensorflow`, `wasm` or `cpu`. */
  name: string;
  kind: BackendKind;
  /** Whether the wasm binary in use has SIMD; false for the other backends. */
  simd: boolean;
  /** Threads the backend computes with. */
  threads: number;
  /** Why each faster backend was passed over, in the order tried (empty when forced). */
  skipped: string[];
  /**
   * On the wasm backend, which versions of our gradient kernels run (`wasm-simd` or `js`) and,
   * for `js`, why; absent on the other backends, which use their own.
   */
  kernels?: KernelPathInfo;
}

const TFJS_NODE_PACKAGES = [
  { pkg: '@tensorflow/tfjs-node-gpu', kind: 'gpu' },
  { pkg: '@tensorflow/tfjs-node', kind: 'native' },
] as const;

const WASM_PACKAGE = '@tensorflow/tfjs-backend-wasm';

/** The parts of `@tensorflow/tfjs-backend-wasm` that backend selection uses. */
export interface WasmBackendModule {
  setWasmPaths(prefix: string): void;
  getThreadsCount(): number;
}

let wasmModule: Promise<WasmBackendModule> | undefined;

/**
 * Loads the wasm backend package, points it at the `.wasm` binaries in its own `dist` folder
 * on disk, and registers the kernels it lacks for training. Does not switch backends. Safe to
 * call many times; must run before the first `tf.setBackend('wasm')`.
 */
export function prepareWasmBackend(): Promise<WasmBackendModule> {
  wasmModule ??= loadWasmBackendModule().catch((error: unknown) => {
    wasmModule = undefined;
    throw error;
  });
  return wasmModule;
}

async function loadWasmBackendModule(): Promise<WasmBackendModule> {
  const loaded = (await import(WASM_PACKAGE)) as Partial<WasmBackendModule> & { default?: WasmBackendModule };
  const wasm: WasmBackendModule =
    typeof loaded.setWasmPaths === 'function' ? (loaded as WasmBackendModule) : loaded.default!;
  if (tf.findBackendFactory('wasm') === undefined) {
    throw new BackendUnavailableError(
      `${WASM_PACKAGE} registered its backend into another @tensorflow/tfjs-core instance than @tensorflow/tfjs uses`,
    );
  }
  const distDir = dirname(createRequire(import.meta.url).resolve(WASM_PACKAGE));
  wasm.setWasmPaths(distDir + sep);
  registerWasmKernels();
  return wasm;
}

/** Loads a module by name at run time, so that optional packages may be absent. */
async function importOptional(specifier: string): Promise<unknown> {
  return import(specifier);
}

async function activate(name: string): Promise<void> {
  let ok: boolean;
  try {
    ok = await tf.setBackend(name);
  } catch (cause) {
    throw new BackendUnavailableError(`backend '${name}' failed to initialise`, { cause });
  }
  if (!ok) throw new BackendUnavailableError(`backend '${name}' failed to initialise (tf.setBackend returned false)`);
  await tf.ready();
  if (tf.getBackend() !== name) {
    throw new BackendUnavailableError(`backend '${name}' was requested but '${tf.getBackend()}' is active`);
  }
}

async function useTensorflow(): Promise<BackendInfo> {
  const failures: string[] = [];
  for (const { pkg, kind } of TFJS_NODE_PACKAGES) {
    try {
      await importOptional(pkg);
    } catch (cause) {
      failures.push(`${pkg}: ${cause instanceof Error ? cause.message.split('\n')[0] : String(cause)}`);
      continue;
    }
    if (tf.findBackendFactory('tensorflow') === undefined) {
      throw new BackendUnavailableError(
        `${pkg} loaded but registered its backend into another @tensorflow/tfjs-core instance than @tensorflow/tfjs uses`,
      );
    }
    await activate('tensorflow');
    const usingGpu = (tf.backend() as { isUsingGpuDevice?: boolean }).isUsingGpuDevice;
    return {
      name: 'tensorflow',
      kind: kind === 'gpu' && usingGpu !== false ? 'gpu' : 'native',
      simd: false,
      threads: availableParallelism(),
      skipped: [],
    };
  }
  throw new BackendUnavailableError(`no TensorFlow native binding is installed (${failures.join('; ')})`);
}

async function useWasm(): Promise<BackendInfo> {
  const wasm = await prepareWasmBackend();
  await activate('wasm');
  const simd = (await tf.env().getAsync('WASM_HAS_SIMD_SUPPORT')) === true;
  return {
    name: 'wasm',
    kind: simd ? 'wasm-simd' : 'wasm',
    simd,
    threads: Math.max(1, wasm.getThreadsCount()),
    skipped: [],
    kernels: chooseKernelPath(tf.backend() as unknown as WasmHeapBackend),
  };
}

/**
 * Chooses again which versions of our gradient kernels the wasm backend runs (see
 * {@link BackendInfo.kernels}): `preferred`, else `TRIBUTARY_KERNELS` (`js` forces plain
 * JavaScript), else SIMD where it loads. {@link selectBackend} already chose once; this is for
 * comparing the two in one process.
 *
 * @throws BackendUnavailableError when the wasm backend has not been initialised.
 */
export function selectWasmKernels(preferred?: KernelPath): KernelPathInfo {
  const backend = tf.findBackend('wasm');
  if (backend === null) {
    throw new BackendUnavailableError("the wasm backend has not been initialised (tf.setBackend('wasm'))");
  }
  return chooseKernelPath(backend as unknown as WasmHeapBackend, preferred);
}

async function useCpu(): Promise<BackendInfo> {
  await activate('cpu');
  return { name: 'cpu', kind: 'cpu', simd: false, threads: 1, skipped: [] };
}

const ACTIVATORS: Record<BackendChoice, () => Promise<BackendInfo>> = {
  tensorflow: useTensorflow,
  wasm: useWasm,
  cpu: useCpu,
};

function isBackendChoice(value: string): value is BackendChoice {
  return (BACKEND_CHOICES as readonly string[]).includes(value);
}

/**
 * Makes the fastest available TensorFlow.js backend the active one and describes it. Order:
 * tfjs-node-gpu, tfjs-node (both optional packages), wasm (SIMD when the runtime has it), plain
 * JS `cpu`. `preferred`, else the `TRIBUTARY_BACKEND` environment variable, forces one choice
 * (an empty string or `auto` means no preference); a forced backend that cannot start is an
 * error, not a silent fallback.
 *
 * @throws BackendUnavailableError for an unknown or unavailable forced backend.
 */
export async function selectBackend(preferred?: string): Promise<BackendInfo> {
  const noPreference = (value: string | undefined): boolean => value === undefined || value === '' || value === 'auto';
  const fromCaller = !noPreference(preferred);
  const forced = fromCaller ? preferred : process.env[BACKEND_ENV_VAR];
  if (!noPreference(forced) && forced !== undefined) {
    if (!isBackendChoice(forced)) {
      throw new BackendUnavailableError(
        `unknown backend '${forced}' (from ${fromCaller ? 'the caller' : BACKEND_ENV_VAR}); expected one of ${BACKEND_CHOICES.join(', ')}`,
      );
    }
    return ACTIVATORS[forced]();
  }
  const failures: unknown[] = [];
  for (const choice of BACKEND_CHOICES) {
    try {
      const info = await ACTIVATORS[choice]();
      return { ...info, skipped: failures.map((f) => (f instanceof Error ? f.message : String(f))) };
    } catch (error) {
      failures.push(error);
    }
  }
  throw new BackendUnavailableError('no TensorFlow.js backend could be initialised', {
    cause: new AggregateError(failures),
  });
}
