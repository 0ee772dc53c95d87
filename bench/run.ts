/**
 * `npm run bench -- [NAME...] [--json FILE]`: runs benchmarks by name, each measuring its own
 * baseline in the same run, prints every figure beside its baseline, ratio and target, and with
 * `--json` writes `{"machine": {...}, "results": [...]}` to FILE. Without names it runs the quick
 * ones. Exits 2 on a wrong name or flag; 1 when a benchmark failed to run (a missed target is a
 * figure, not a failure).
 */
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { withServiceMalloc } from '#libs/local-cluster';
import { machine, type BenchResult } from './bench-result.js';
import { ROOT } from './cluster/bench-cluster.js';

/** A benchmark the runner knows. */
interface Benchmark {
  name: string;
  about: string;
  /** Run when no name is given. */
  quick: boolean;
  run(say: (line: string) => void): Promise<BenchResult[]>;
}

/** Runs one of the older benchmarks, which print their own tables, as a process. */
function printing(script: string, args: string[] = []): () => Promise<BenchResult[]> {
  return async () => {
    const result = spawnSync(process.execPath, [join(ROOT, 'dist', 'bench', script), ...args], { stdio: 'inherit' });
    if (result.status !== 0) throw new Error(`${script} exited with ${result.status}`);
    return [];
  };
}

export const BENCHMARKS: readonly Benchmark[] = [
  {
    name: 'overhead',
    about: '1 trainer + 1 pserver samples/s vs the learner alone, with a step breakdown',
    quick: true,
    run: async (say) => (await import('./overhead/overhead.js')).runOverheadBench(say),
  },
  {
    name: 'scaling',
    about: '2 trainers vs 1 trainer samples/s',
    quick: true,
    run: async (say) => (await import('./scaling/scaling.js')).runScalingBench(say),
  },
  {
    name: 'exchange',
    about: 'push + pull of a 4 MiB model through one pserver vs raw loopback TCP (and HTTP/2 and gRPC alone)',
    quick: true,
    run: async (say) => (await import('./exchange/exchange.js')).runExchangeBench(say),
  },
  {
    name: 'cnn-step',
    about: 'CNN learner step on wasm, samples/s with our SIMD kernels vs the plain JS kernels',
    quick: true,
    run: async (say) => (await import('./learner/cnn-step.js')).runCnnStepBench(say),
  },
  {
    name: 'clone',
    about: "learner step on wasm (MLP, CNN), our Identity sharing a clone's memory vs the wasm build's copy",
    quick: false,
    run: async (say) => (await import('./learner/clone-step.js')).runCloneStepBench(say),
  },
  {
    name: 'matmul',
    about: 'learner step on wasm (MLP, CNN), untransposed products by our SIMD128 kernel vs the backend (XNNPACK)',
    quick: false,
    run: async (say) => (await import('./learner/matmul-step.js')).runMatMulStepBench(say),
  },
  {
    name: 'loss',
    about: 'learner step on wasm (MLP, CNN), the mean cross-entropy as one host op vs TF.js kernels',
    quick: false,
    run: async (say) => (await import('./learner/loss-step.js')).runLossStepBench(say),
  },
  {
    name: 'bias',
    about: "learner step on wasm (MLP, CNN), a layer's bias and its gradient by our SIMD128 kernels vs the backend",
    quick: false,
    run: async (say) => (await import('./learner/bias-step.js')).runBiasStepBench(say),
  },
  {
    name: 'relu',
    about: "learner step on wasm (MLP, CNN), relu's gradient by our SIMD128 kernel vs TF.js's three kernels",
    quick: false,
    run: async (say) => (await import('./learner/relu-step.js')).runReluStepBench(say),
  },
  {
    name: 'age',
    about: "the example's learner on wasm after 40 s of training vs a fresh one, samples/s",
    quick: false,
    run: async (say) => (await import('./learner/age-step.js')).runAgeStepBench(say),
  },
  {
    name: 'kernels',
    about: 'pserver math over 16M floats: SIMD128 accumulate, sgd, momentum, adam vs plain JS vs a copy',
    quick: true,
    run: async (say) => (await import('./kernels/kernels.js')).runKernelsBench(say),
  },
  {
    name: 'tta',
    about: 'time to 0.85 test accuracy: 2 trainers + 2 pservers vs a single-process loop',
    quick: false,
    run: async (say) => (await import('./tta/tta.js')).runTtaBench(say),
  },
  {
    name: 'modes',
    about: 'the example MLP for 2 epochs in every training mode (and float16 transfer): test accuracy vs sync',
    quick: false,
    run: async (say) => (await import('./modes/modes.js')).runModesBench(say),
  },
  {
    name: 'recordio',
    about: 'RecordIO read throughput vs a plain sequential read (prints its own table)',
    quick: false,
    run: printing('recordio/read-throughput.js'),
  },
  {
    name: 'learner',
    about: 'learner train step, samples/s per TF.js backend (prints its own table)',
    quick: false,
    run: printing('learner/train-step.js'),
  },
  {
    name: 'chaos',
    about: 'random kills, time to recover (prints its own table; CHAOS_MINUTES, CHAOS_SEED)',
    quick: false,
    run: printing('chaos/run.js', [
      '--minutes',
      process.env['CHAOS_MINUTES'] ?? '5',
      '--seed',
      process.env['CHAOS_SEED'] ?? '1',
    ]),
  },
];

/** What the command line asked for. */
export interface BenchArgs {
  names: string[];
  json?: string;
  help: boolean;
}

/** The usage text. */
export function usage(benchmarks: readonly Benchmark[] = BENCHMARKS): string {
  const width = Math.max(...benchmarks.map((b) => b.name.length));
  return [
    'usage: npm run bench -- [NAME...] [--json FILE]',
    '',
    'benchmarks (* runs when no name is given):',
    ...benchmarks.map((b) => `  ${b.name.padEnd(width)} ${b.quick ? '*' : ' '} ${b.about}`),
  ].join('\n');
}

/** Parses the arguments; throws an Error naming a wrong flag or benchmark. */
export function parseBenchArgs(argv: readonly string[], benchmarks: readonly Benchmark[] = BENCHMARKS): BenchArgs {
  const { values, positionals } = parseArgs({
    args: [...argv],
    options: { json: { type: 'string' }, help: { type: 'boolean', short: 'h' } },
    allowPositionals: true,
    strict: true,
  });
  const unknown = positionals.filter((n) => !benchmarks.some((b) => b.name === n));
  if (unknown.length > 0) throw new Error(`unknown benchmark ${unknown.map((n) => `'${n}'`).join(', ')}`);
  const names = positionals.length > 0 ? positionals : benchmarks.filter((b) => b.quick).map((b) => b.name);
  return { names, json: values.json, help: values.help ?? false };
}

/** The results as the rows of the printed table. */
export function resultRows(results: readonly BenchResult[]): string[] {
  return results.flatMap((r) => [
    `${r.met ? 'met   ' : 'missed'} ${r.name}: ${r.figure} ${r.unit} vs ${r.baseline} ${r.unit}, ratio ${r.ratio} ` +
      `(target ${r.lowerIsBetter ? '<=' : '>='} ${r.target})`,
    ...(r.detail ? [`       ${r.detail}`] : []),
  ]);
}

async function main(): Promise<number> {
  let args: BenchArgs;
  try {
    args = parseBenchArgs(process.argv.slice(2));
  } catch (err) {
    process.stderr.write(`${(err as Error).message}\n\n${usage()}\n`);
    return 2;
  }
  if (args.help) {
    process.stdout.write(`${usage()}\n`);
    return 0;
  }
  const results: BenchResult[] = [];
  let failed = false;
  for (const name of args.names) {
    const bench = BENCHMARKS.find((b) => b.name === name)!;
    const started = Date.now();
    const say = (line: string) =>
      process.stdout.write(`  [${name} ${Math.round((Date.now() - started) / 1000)} s] ${line}\n`);
    process.stdout.write(`==> ${name}: ${bench.about}\n`);
    try {
      const found = await bench.run(say);
      results.push(...found);
      for (const line of resultRows(found)) process.stdout.write(`${line}\n`);
    } catch (err) {
      failed = true;
      process.stdout.write(`FAILED ${name}: ${(err as Error).stack ?? String(err)}\n`);
    }
  }
  if (results.length > 0) {
    process.stdout.write(`\n==> summary\n${resultRows(results).join('\n')}\n`);
  }
  if (args.json) {
    writeFileSync(args.json, `${JSON.stringify({ machine: machine(), results }, null, 2)}\n`);
    process.stdout.write(`results written to ${args.json}\n`);
  }
  return failed ? 1 : 0;
}

/** Set in the environment of the runner started again by {@link runWithServiceMalloc}. */
const RESTARTED = 'TRIBUTARY_BENCH_RESTARTED';

/**
 * The runner measures baselines in its own process (the single-process loop of `tta`) and in
 * processes it starts (the learners of `scaling`, the TCP echo of `exchange`), which inherit its
 * environment: it runs with the services' malloc settings, starting itself again with them when
 * it was started without, so that baselines and clusters are measured alike.
 */
function runWithServiceMalloc(): number | undefined {
  const env = withServiceMalloc(process.env);
  // Once only, whatever the C library makes of the variable.
  if (env === process.env || process.env[RESTARTED] === '1') return undefined;
  const again = spawnSync(process.execPath, [...process.execArgv, ...process.argv.slice(1)], {
    stdio: 'inherit',
    env: { ...env, [RESTARTED]: '1' },
  });
  return again.status ?? 1;
}

if (process.argv[1]?.endsWith(join('bench', 'run.js'))) process.exitCode = runWithServiceMalloc() ?? (await main());
