/**
 * The part of the WebAssembly JavaScript API that our kernels use. Node.js has all of it, but
 * TypeScript declares it only in its DOM and web-worker libraries, which this project leaves out.
 */
declare global {
  namespace WebAssembly {
    type ImportValue = Memory | ((...args: never[]) => unknown) | number;
    type Imports = Record<string, Record<string, ImportValue>>;
    type Exports = Record<string, unknown>;

    interface MemoryDescriptor {
      initial: number;
      maximum?: number;
      shared?: boolean;
    }

    class Memory {
      constructor(descriptor: MemoryDescriptor);
      readonly buffer: ArrayBuffer | SharedArrayBuffer;
      grow(delta: number): number;
    }

    class Module {
      constructor(bytes: BufferSource);
    }

    class Instance {
      constructor(module: Module, imports?: Imports);
      readonly exports: Exports;
    }

    function validate(bytes: BufferSource): boolean;
  }
}

export {};
