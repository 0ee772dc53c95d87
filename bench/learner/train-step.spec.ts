import { parseTrainStepArgs } from './train-step.js';

describe('learner bench arguments', () => {
  it('learner bench - defaults to every backend at the workloads own batch sizes', () => {
    expect(parseTrainStepArgs([])).toEqual({
      seconds: 3,
      batch: undefined,
      backends: ['tensorflow', 'webgpu', 'wasm', 'cpu'],
    });
  });

  it('learner bench - --batch, --backend and --seconds pick what is timed', () => {
    expect(parseTrainStepArgs(['--batch', '1024', '--backend', 'webgpu,wasm', '--seconds', '0.5'])).toEqual({
      seconds: 0.5,
      batch: 1024,
      backends: ['webgpu', 'wasm'],
    });
  });

  it.each([
    [['--batch', '0'], "--batch must be a positive integer, got '0'"],
    [['--batch', '6.5'], "--batch must be a positive integer, got '6.5'"],
    [['--seconds', 'soon'], "--seconds must be a positive number, got 'soon'"],
    [['--backend', 'webgpu,gpu'], "--backend: unknown backend 'gpu' (one of tensorflow, webgpu, wasm, cpu)"],
    [['--fast'], /--fast/],
  ])('learner bench - %j is refused by name', (argv, message) => {
    expect(() => parseTrainStepArgs(argv)).toThrow(message);
  });
});
