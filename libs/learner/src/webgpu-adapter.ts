import * as tf from '@tensorflow/tfjs';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { BackendUnavailableError, firstLineOf } from './errors.js';
import { importFailure, importOptional, isResolvable } from './optional-package.js';

/**
 * How long the webgpu route waits for Dawn to answer one adapter or device request before it
 * gives up on WebGPU. Dawn answers in milliseconds on a machine without a GPU; the limit is
 * there so that a wedged driver cannot stall a trainer's start.
 */
export const WEBGPU_REQUEST_TIMEOUT_MS = 10_000;

/** The `webgpu` package: Dawn, Chromium's WebGPU implementation, built as a Node addon. */
const DAWN_PACKAGE = 'webgpu';
const TFJS_WEBGPU_PACKAGE = '@tensorflow/tfjs-backend-webgpu';

/**
 * Adapter names of software renderers: SwiftShader (Dawn's own CPU Vulkan), Mesa's llvmpipe,
 * lavapipe and softpipe, Windows' WARP, and Dawn's `null` backend, which computes nothing.
 */
const SOFTWARE_ADAPTER_NAMES = /swiftshader|llvmpipe|lavapipe|softpipe|microsoft basic render|null-backend/i;

/**
 * Device limits tfjs-backend-webgpu raises to the adapter's maxima (its own backend factory does
 * the same): the WebGPU defaults are far below what large tensors and its matmul shaders need.
 */
const RAISED_LIMITS = [
  'maxComputeWorkgroupStorageSize',
  'maxComputeWorkgroupsPerDimension',
  'maxStorageBufferBindingSize',
  'maxBufferSize',
  'maxComputeWorkgroupSizeX',
  'maxComputeInvocationsPerWorkgroup',
] as const;

/** Optional features the backend uses when the adapter has them, as its own factory asks. */
const WANTED_FEATURES = ['timestamp-query', 'bgra8unorm-storage'] as const;

/*
 * The parts of WebGPU and of the two packages used here, typed by hand: both packages are
 * optional, so the build may not see their declarations.
 */
interface GpuAdapterInfo {
  readonly vendor: string;
  readonly architecture: string;
  readonly device: string;
  readonly description: string;
  readonly isFallbackAdapter?: boolean;
}

interface GpuDevice {
  readonly features: ReadonlySet<string>;
}

interface GpuAdapter {
  readonly features: ReadonlySet<string>;
  readonly limits: Readonly<Record<string, number>>;
  /** Newer Dawn and the current spec; `isFallbackAdapter` moved here from the adapter. */
  readonly info?: GpuAdapterInfo;
  readonly isFallbackAdapter?: boolean;
  requestDevice(descriptor: { requiredFeatures: string[]; requiredLimits: Record<string, number> }): Promise<GpuDevice>;
}

interface Gpu {
  requestAdapter(options: { powerPreference: 'high-performance' | 'low-power' }): Promise<GpuAdapter | null>;
}

interface DawnModule {
  create(options: string[]): Gpu;
  globals: Record<string, unknown>;
}

interface TfjsWebgpuModule {
  WebGPUBackend: new (device: GpuDevice, adapterInfo?: GpuAdapterInfo) => tf.KernelBackend;
}

/** Folders where a Linux distribution keeps the Vulkan loader, besides `LD_LIBRARY_PATH`'s. */
const LIBRARY_DIRS = [
  '/usr/lib/x86_64-linux-gnu',
  '/usr/lib/aarch64-linux-gnu',
  '/lib/x86_64-linux-gnu',
  '/lib/aarch64-linux-gnu',
  '/usr/lib64',
  '/usr/lib',
  '/lib64',
  '/lib',
  '/usr/local/lib',
  '/usr/local/nvidia/lib64',
];

/**
 * On Linux, Dawn reaches GPUs only through the Vulkan loader, `libvulkan.so.1`. Where it is
 * absent Dawn can find no adapter, and loading it anyway prints a warning on stderr at every
 * trainer start, so the route is passed over before Dawn loads. True elsewhere.
 */
export function vulkanLoaderPresent(
  platform: NodeJS.Platform = process.platform,
  libraryPath: string | undefined = process.env['LD_LIBRARY_PATH'],
): boolean {
  if (platform !== 'linux') return true;
  const dirs = [...(libraryPath ?? '').split(':').filter((d) => d !== ''), ...LIBRARY_DIRS];
  return dirs.some((dir) => existsSync(join(dir, 'libvulkan.so.1')));
}

/** Rejects with a named reason when `promise` has not settled within `ms`. */
async function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new BackendUnavailableError(`webgpu: ${what} got no answer within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

function describeAdapter(info: GpuAdapterInfo | undefined): string {
  if (info === undefined) return 'unnamed adapter';
  const name = info.description || info.device;
  const family = [info.vendor, info.architecture].filter((s) => s !== '').join(' ');
  if (family === '') return name || 'unnamed adapter';
  return name === '' ? family : `${family} (${name})`;
}

/** Why the adapter is not a hardware GPU, or undefined when it is one. */
function softwareReason(adapter: GpuAdapter): string | undefined {
  const info = adapter.info;
  if (info?.isFallbackAdapter === true || adapter.isFallbackAdapter === true) {
    return 'a fallback adapter (software rendering on the CPU), not a GPU';
  }
  const names = [info?.vendor, info?.architecture, info?.device, info?.description].join(' ');
  const match = SOFTWARE_ADAPTER_NAMES.exec(names);
  return match === null ? undefined : `a software renderer (${match[0]}) on the CPU, not a GPU`;
}

/**
 * Makes the WebGPU objects visible where tfjs-backend-webgpu looks for them: it reads the
 * `GPUBufferUsage`-style constants as browser globals while computing, and its backend's
 * constructor refuses to run unless `navigator.gpu` is set. Node 21 and later define a
 * `navigator` of their own, which keeps its other fields.
 */
function exposeToTfjs(gpu: Gpu, globals: Record<string, unknown>): void {
  Object.assign(globalThis, globals);
  const scope = globalThis as { navigator?: object };
  if (scope.navigator === undefined) {
    scope.navigator = { gpu };
  } else {
    Object.defineProperty(scope.navigator, 'gpu', { value: gpu, configurable: true, writable: true });
  }
}

/**
 * A GPU adapter Dawn offered this process, judged for training: {@link software} says why it is
 * not a hardware GPU when it is a software renderer. {@link start} makes it the device of
 * TensorFlow.js's `webgpu` backend.
 */
export class WebgpuAdapter {
  /** Vendor, architecture and the driver's name for it, e.g. `nvidia hopper (NVIDIA H100 PCIe)`. */
  readonly description: string;
  /** Why the adapter is not a hardware GPU (SwiftShader, llvmpipe, ...); undefined for a GPU. */
  readonly software: string | undefined;
  private readonly dawn: DawnModule;
  private readonly gpu: Gpu;
  private readonly adapter: GpuAdapter;
  private readonly timeoutMs: number;

  private constructor(dawn: DawnModule, gpu: Gpu, adapter: GpuAdapter, timeoutMs: number) {
    this.dawn = dawn;
    this.gpu = gpu;
    this.adapter = adapter;
    this.timeoutMs = timeoutMs;
    this.description = describeAdapter(adapter.info);
    this.software = softwareReason(adapter);
  }

  /**
   * Loads Dawn and asks it for its high-performance adapter. Touches no global state and leaves
   * nothing running when it fails. `dawnOptions` go to Dawn's `create` as they are (for
   * example `backend=vulkan` or `adapter=NAME`).
   *
   * @throws BackendUnavailableError naming why: a package missing or failing to load, the
   * adapter request failing (an option Dawn does not know), no adapter (`webgpu: no GPU
   * adapter found`), or no answer within `timeoutMs`.
   */
  static async find(
    dawnOptions: readonly string[] = [],
    timeoutMs = WEBGPU_REQUEST_TIMEOUT_MS,
  ): Promise<WebgpuAdapter> {
    // Checked first so that a half-installed route fails before Dawn starts a driver.
    if (!isResolvable(TFJS_WEBGPU_PACKAGE)) {
      throw new BackendUnavailableError(`webgpu: ${TFJS_WEBGPU_PACKAGE} is not installed`);
    }
    // Dawn's other backends (`backend=null`, for tests) need no Vulkan.
    const dawnBackend = dawnOptions.find((o) => o.startsWith('backend='))?.slice('backend='.length) ?? 'vulkan';
    if (dawnBackend === 'vulkan' && !vulkanLoaderPresent()) {
      throw new BackendUnavailableError(
        'webgpu: no Vulkan loader (libvulkan.so.1) on this machine, so Dawn can reach no GPU; install libvulkan1 and the GPU driver',
      );
    }
    let dawn: DawnModule;
    try {
      dawn = (await importOptional(DAWN_PACKAGE)) as DawnModule;
    } catch (cause) {
      throw new BackendUnavailableError(
        `webgpu: the ${DAWN_PACKAGE} package (Dawn) ${loadFailure(DAWN_PACKAGE, cause)}`,
        { cause },
      );
    }
    const withOptions = dawnOptions.length === 0 ? '' : ` with Dawn options [${dawnOptions.join(', ')}]`;
    try {
      // Dawn reads its options when the first adapter is requested, so a bad one fails there.
      const gpu = dawn.create([...dawnOptions]);
      const adapter = await within(
        gpu.requestAdapter({ powerPreference: 'high-performance' }),
        timeoutMs,
        'the adapter request',
      );
      if (adapter !== null) return new WebgpuAdapter(dawn, gpu, adapter, timeoutMs);
    } catch (cause) {
      if (cause instanceof BackendUnavailableError) throw cause;
      throw new BackendUnavailableError(`webgpu: the adapter request${withOptions} failed: ${firstLineOf(cause)}`, {
        cause,
      });
    }
    throw new BackendUnavailableError(`webgpu: no GPU adapter found${withOptions}`);
  }

  /**
   * Opens a device on the adapter, loads tfjs-backend-webgpu and registers TensorFlow.js's
   * `webgpu` backend on that device (replacing any earlier registration), ready for
   * `tf.setBackend('webgpu')`. From here on `navigator.gpu` and the WebGPU constants are
   * globals of this process.
   *
   * @throws BackendUnavailableError when the device request fails or gets no answer in time,
   * or the backend package does not load into the `@tensorflow/tfjs` in use.
   */
  async start(): Promise<void> {
    let backendModule: TfjsWebgpuModule;
    try {
      const loaded = (await importOptional(TFJS_WEBGPU_PACKAGE)) as Partial<TfjsWebgpuModule> & {
        default?: TfjsWebgpuModule;
      };
      backendModule = typeof loaded.WebGPUBackend === 'function' ? (loaded as TfjsWebgpuModule) : loaded.default!;
    } catch (cause) {
      throw new BackendUnavailableError(`webgpu: ${TFJS_WEBGPU_PACKAGE} ${loadFailure(TFJS_WEBGPU_PACKAGE, cause)}`, {
        cause,
      });
    }
    if (tf.getKernel('Conv2D', 'webgpu') === undefined) {
      throw new BackendUnavailableError(
        `webgpu: ${TFJS_WEBGPU_PACKAGE} registered its kernels into another @tensorflow/tfjs-core instance than @tensorflow/tfjs uses`,
      );
    }
    const requiredFeatures = WANTED_FEATURES.filter((f) => this.adapter.features.has(f));
    const requiredLimits: Record<string, number> = {};
    for (const name of RAISED_LIMITS) {
      const value = this.adapter.limits[name];
      if (value !== undefined) requiredLimits[name] = value;
    }
    let device: GpuDevice;
    try {
      device = await within(
        this.adapter.requestDevice({ requiredFeatures, requiredLimits }),
        this.timeoutMs,
        'the device request',
      );
    } catch (cause) {
      if (cause instanceof BackendUnavailableError) throw cause;
      throw new BackendUnavailableError(
        `webgpu: adapter '${this.description}' refused a device: ${firstLineOf(cause)}`,
        { cause },
      );
    }
    exposeToTfjs(this.gpu, this.dawn.globals);
    // The package registers a factory of its own when `navigator.gpu` existed before it
    // loaded; that one would ask for an adapter again, possibly another one. (For an unknown
    // name `findBackendFactory` returns null, whatever its declared type says.)
    if (tf.findBackendFactory('webgpu') != null) tf.removeBackend('webgpu');
    const { WebGPUBackend } = backendModule;
    const info = this.adapter.info;
    tf.registerBackend('webgpu', () => new WebGPUBackend(device, info), 3);
  }
}

function loadFailure(pkg: string, cause: unknown): string {
  const reason = importFailure(pkg, cause);
  return reason === 'not installed' ? 'is not installed' : `failed to load: ${reason}`;
}
