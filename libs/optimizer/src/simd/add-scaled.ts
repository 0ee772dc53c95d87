/** The module of the scaled delta (`add-scaled.wat`); `addScaled(out, param, delta, n, scale)` is its export. */
export const ADD_SCALED_MODULE = new URL('./add-scaled.wasm', import.meta.url);
