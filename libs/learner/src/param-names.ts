import type * as tf from '@tensorflow/tfjs';

/** A trainable weight of a model with its canonical parameter name. */
export interface NamedVariable {
  name: string;
  variable: tf.Variable;
}

/**
 * The trainable weights of `model` in their fixed order (layer order, then each layer's own
 * weight order), each with a canonical name `layers/<i>/<weight>`: `i` is the layer's index in
 * `model.layers` and `weight` the last part of the weight's name (`kernel`, `bias`, `gamma`...).
 * A name that repeats inside one layer (a nested model) gets `_1`, `_2`... in order.
 *
 * TF.js variable names cannot serve: they carry layer-name counters and `_1` suffixes that
 * depend on what the process built before. Canonical names depend only on the model's
 * structure, so every process that builds the same spec agrees on them.
 */
export function namedTrainableVariables(model: tf.LayersModel): NamedVariable[] {
  const named: NamedVariable[] = [];
  const taken = new Set<string>();
  model.layers.forEach((layer, i) => {
    for (const weight of layer.trainableWeights) {
      const short = weight.originalName.split('/').pop() ?? weight.originalName;
      let name = `layers/${i}/${short}`;
      for (let k = 1; taken.has(name); k++) name = `layers/${i}/${short}_${k}`;
      taken.add(name);
      named.push({ name, variable: weight.read() as tf.Variable });
    }
  });
  return named;
}
