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
