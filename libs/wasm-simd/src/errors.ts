/** A WebAssembly kernel module cannot be used here: its binary is missing, invalid, or needs SIMD. */
export class WasmKernelUnavailableError extends Error {
  override readonly name = 'WasmKernelUnavailableError';
  constructor(
    /** The `.wasm` file, or the module's name when no file is involved. */
    readonly module: string,
    reason: string,
    options?: ErrorOptions,
  ) {
    super(`WebAssembly kernels ${module}: ${reason}`, options);
  }
}

/** The kernel heap cannot hold another array: its memory reached its maximum or could not grow. */
export class KernelHeapExhaustedError extends Error {
  override readonly name = 'KernelHeapExhaustedError';
  constructor(
    /** Bytes asked for. */
    readonly requestedBytes: number,
    /** Bytes the heap's memory holds now. */
    readonly heapBytes: number,
    options?: ErrorOptions,
  ) {
    super(
      `kernel heap: no room for ${requestedBytes} bytes (memory of ${heapBytes} bytes cannot grow enough)`,
      options,
    );
  }
}

/** An array given back to the kernel heap is not one it handed out, or was given back already. */
export class NotHeapAllocationError extends Error {
  override readonly name = 'NotHeapAllocationError';
  constructor(
    /** Byte offset of the array in the heap's memory (or in its own buffer when not in the heap). */
    readonly byteOffset: number,
    reason: string,
  ) {
    super(`kernel heap: array at byte ${byteOffset} ${reason}`);
  }
}

/** A kernel was called with arrays that do not fit its length, or with too many arrays to stage. */
export class KernelArgumentError extends Error {
  override readonly name = 'KernelArgumentError';
  constructor(
    /** The export called. */
    readonly entry: string,
    message: string,
  ) {
    super(`kernel ${entry}: ${message}`);
  }
}

/** A kernel choice (`TRIBUTARY_KERNELS`) is not one of `auto`, `wasm-simd` and `js`. */
export class InvalidKernelChoiceError extends Error {
  override readonly name = 'InvalidKernelChoiceError';

  constructor(
    /** Where the value came from. */
    readonly source: string,
    readonly value: string,
    options?: ErrorOptions,
  ) {
    super(`${source} = ${JSON.stringify(value)}: expected auto, wasm-simd or js`, options);
  }
}
