import * as tf from '@tensorflow/tfjs';
import { availableParallelism } from 'node:os';
import { createRequire } from 'node:module';
import { dirname, sep } from 'node:path';
import { BackendUnavailableError, firstLineOf } from './errors.js';
import { chooseKernelPath, type KernelPath, type KernelPathInfo } from './kernels/kernel-path.js';
import { registerWasmKernels, registerWebgpuKernels } from './kernels/register.js';
import type { WasmHeapBackend } from './kernels/wasm-heap.js';
import { importFailure, importOptional } from './optional-package.js';
import { WebgpuAdapter } from './webgpu-adapter.js';

/** Environment variable that forces one backend: `tensorflow`, `webgpu`, `wasm` or `cpu`. */
export const BACKEND_ENV_VAR = 'TRIBUTARY_BACKEND';

/**
 * Backends a caller may ask for: `tensorflow` means tfjs-node-gpu, else tfjs-node; `webgpu`
 * means tfjs-backend-webgpu on Dawn (the `webgpu` package).
 */
export const BACKEND_CHOICES = ['tensorflow', 'webgpu', 'wasm', 'cpu'] as const;

/** One of {@link BACKEND_CHOICES}. */
export type BackendChoice = (typeof BACKEND_CHOICES)[number];

/**
 * What kind of compute the selected backend runs on. A forced `webgpu` backend on a software
 * adapter (SwiftShader, llvmpipe) is `cpu`.
 */
export type BackendKind = 'gpu' | 'native' | 'wasm-simd' | 'wasm' | 'cpu';

/** The backend a process trains with, for the caller to log. */
export interface BackendInfo {
  /** TensorFlow.js backend name: `tensorflow`, `webgpu`, `wasm` or `cpu`. */
  name: string;
  kind: BackendKind;
  /** Whether the wasm binary in use has SIMD; false for the other backends. */
  simd: boolean;
  /** Threads the backend computes with; 1 for `webgpu`, whose work runs on the GPU. */
  threads: number;
  /** The device, where the backend names one: the WebGPU adapter for `webgpu`. */
  device?: string;
  /** Why each faster backend was passed over, in the order tried (empty when forced). */
  skipped: string[];
  /**
   * On the wasm backend, which versions of our gradient kernels run (`wasm-simd` or `js`) and,
   * for `js`, why; absent on the other backends, which use their own.
   */
  kernels?: KernelPathInfo;
}

/** How {@link selectBackend} may be tuned besides the choice of backend. */
export interface SelectBackendOptions {
  /**
   * Options handed to Dawn's `create` for the webgpu route, for example `backend=vulkan` or
   * `adapter=NAME` to pick one adapter among several. None by default.
   */
  dawnOptions?: readonly string[];
}

const TFJS_NODE_GPU_PACKAGE = '@tensorflow/tfjs-node-gpu';
const TFJS_NODE_PACKAGE = '@tensorflow/tfjs-node';
const TFJS_NODE_PACKAGES = [TFJS_NODE_GPU_PACKAGE, TFJS_NODE_PACKAGE] as const;

const WASM_PACKAGE = '@tensorflow/tfjs-backend-wasm';

/** The parts of `@tensorflow/tfjs-backend-wasm` that backend selection uses. */
export interface WasmBackendModule {
  setWasmPaths(prefix: string): void;
  getThreadsCount(): number;
}

let wasmModule: Promise<WasmBackendModule> | undefined;

/**
 * Whether a backend of that name is registered with `@tensorflow/tfjs`. `tf.findBackendFactory`
 * returns null for an unknown name, whatever its declared type says.
 */
function isRegistered(name: string): boolean {
  return tf.findBackendFactory(name) != null;
}

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
  if (!isRegistered('wasm')) {
    throw new BackendUnavailableError(
      `${WASM_PACKAGE} registered its backend into another @tensorflow/tfjs-core instance than @tensorflow/tfjs uses`,
    );
  }
  const distDir = dirname(createRequire(import.meta.url).resolve(WASM_PACKAGE));
  wasm.setWasmPaths(distDir + sep);
  registerWasmKernels();
  return wasm;
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

/** Loads a tfjs-node package; it registers the `tensorflow` backend as it loads. */
async function loadTfjsNode(pkg: string): Promise<void> {
  try {
    await importOptional(pkg);
  } catch (cause) {
    throw new BackendUnavailableError(`${pkg}: ${importFailure(pkg, cause)}`, { cause });
  }
  if (!isRegistered('tensorflow')) {
    throw new BackendUnavailableError(
      `${pkg} loaded but registered its backend into another @tensorflow/tfjs-core instance than @tensorflow/tfjs uses`,
    );
  }
}

/** Whether the active `tensorflow` backend computes on a CUDA device (tfjs-node-gpu says so). */
function tensorflowOnGpu(): boolean {
  return (tf.backend() as { isUsingGpuDevice?: boolean }).isUsingGpuDevice !== false;
}

function tensorflowInfo(kind: 'gpu' | 'native'): BackendInfo {
  return { name: 'tensorflow', kind, simd: false, threads: availableParallelism(), skipped: [] };
}

/** tfjs-node-gpu, only when TensorFlow finds a CUDA GPU: on the CPU it ranks after webgpu. */
async function useTfjsNodeGpu(): Promise<BackendInfo> {
  await loadTfjsNode(TFJS_NODE_GPU_PACKAGE);
  await activate('tensorflow');
  if (!tensorflowOnGpu()) {
    throw new BackendUnavailableError(`${TFJS_NODE_GPU_PACKAGE}: TensorFlow found no CUDA GPU`);
  }
  return tensorflowInfo('gpu');
}

/** Native TensorFlow on the CPU: tfjs-node, or tfjs-node-gpu already loaded without a GPU. */
async function useTfjsNodeCpu(): Promise<BackendInfo> {
  // Both packages register the same `tensorflow` backend; loading the second would clash.
  if (!isRegistered('tensorflow')) await loadTfjsNode(TFJS_NODE_PACKAGE);
  await activate('tensorflow');
  return tensorflowInfo('native');
}

/** Forced `tensorflow`: tfjs-node-gpu (on a GPU or not), else tfjs-node. */
async function useTensorflow(): Promise<BackendInfo> {
  const failures: string[] = [];
  for (const pkg of TFJS_NODE_PACKAGES) {
    try {
      await importOptional(pkg);
    } catch (cause) {
      failures.push(`${pkg}: ${importFailure(pkg, cause)}`);
      continue;
    }
    if (!isRegistered('tensorflow')) {
      throw new BackendUnavailableError(
        `${pkg} loaded but registered its backend into another @tensorflow/tfjs-core instance than @tensorflow/tfjs uses`,
      );
    }
    await activate('tensorflow');
    return tensorflowInfo(pkg === TFJS_NODE_GPU_PACKAGE && tensorflowOnGpu() ? 'gpu' : 'native');
  }
  throw new BackendUnavailableError(`no TensorFlow native binding is installed (${failures.join('; ')})`);
}

/** The adapter TensorFlow.js's `webgpu` backend was registered on, once one was. */
let webgpuStarted: Promise<WebgpuAdapter> | undefined;

/**
 * tfjs-backend-webgpu on Dawn. A software adapter is passed over unless `forced`. The first
 * adapter started serves the whole process: TensorFlow.js keeps one backend per name.
 */
async function useWebgpu(forced: boolean, options: SelectBackendOptions): Promise<BackendInfo> {
  const adapter = (await webgpuStarted) ?? (await WebgpuAdapter.find(options.dawnOptions));
  if (adapter.software !== undefined && !forced) {
    throw new BackendUnavailableError(`webgpu: adapter '${adapter.description}' is ${adapter.software}`);
  }
  webgpuStarted ??= adapter.start().then(
    () => adapter,
    (error: unknown) => {
      webgpuStarted = undefined;
      throw error;
    },
  );
  await webgpuStarted;
  registerWebgpuKernels();
  await activate('webgpu');
  return {
    name: 'webgpu',
    kind: adapter.software === undefined ? 'gpu' : 'cpu',
    simd: false,
    threads: 1,
    device: adapter.description,
    skipped: [],
  };
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

type Activator = (options: SelectBackendOptions) => Promise<BackendInfo>;

const FORCED: Record<BackendChoice, Activator> = {
  tensorflow: useTensorflow,
  webgpu: (options) => useWebgpu(true, options),
  wasm: useWasm,
  cpu: useCpu,
};

/** Fastest first. Native TensorFlow on the CPU beats WebAssembly, so it comes before wasm. */
const AUTOMATIC: readonly Activator[] = [
  useTfjsNodeGpu,
  (options) => useWebgpu(false, options),
  useTfjsNodeCpu,
  useWasm,
  useCpu,
];

function isBackendChoice(value: string): value is BackendChoice {
  return (BACKEND_CHOICES as readonly string[]).includes(value);
}

/**
 * Makes the fastest available TensorFlow.js backend the active one and describes it. Order:
 * tfjs-node-gpu on a CUDA GPU, webgpu on a hardware GPU adapter, native TensorFlow on the CPU
 * (tfjs-node, or tfjs-node-gpu without a GPU), wasm (SIMD when the runtime has it), plain JS
 * `cpu`. `preferred`, else the `TRIBUTARY_BACKEND` environment variable, forces one choice (an
 * empty string or `auto` means no preference); a forced backend that cannot start is an error,
 * not a silent fallback, and a forced `webgpu` takes a software adapter too.
 *
 * @throws BackendUnavailableError for an unknown or unavailable forced backend.
 */
export async function selectBackend(preferred?: string, options: SelectBackendOptions = {}): Promise<BackendInfo> {
  const noPreference = (value: string | undefined): boolean => value === undefined || value === '' || value === 'auto';
  const fromCaller = !noPreference(preferred);
  const forced = fromCaller ? preferred : process.env[BACKEND_ENV_VAR];
  if (!noPreference(forced) && forced !== undefined) {
    if (!isBackendChoice(forced)) {
      throw new BackendUnavailableError(
        `unknown backend '${forced}' (from ${fromCaller ? 'the caller' : BACKEND_ENV_VAR}); expected one of ${BACKEND_CHOICES.join(', ')}`,
      );
    }
    return FORCED[forced](options);
  }
  const failures: unknown[] = [];
  for (const start of AUTOMATIC) {
    try {
      const info = await start(options);
      return { ...info, skipped: failures.map(firstLineOf) };
    } catch (error) {
      failures.push(error);
    }
  }
  throw new BackendUnavailableError('no TensorFlow.js backend could be initialised', {
    cause: new AggregateError(failures),
  });
}
