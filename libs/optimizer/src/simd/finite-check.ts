/** The module of the finite check (`finite-check.wat`); `allFinite(offset, length)` is its export. */
export const FINITE_CHECK_MODULE = new URL('./finite-check.wasm', import.meta.url);
