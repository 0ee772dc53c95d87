import type { Command } from 'commander';
import type { CliIo } from '../cli-io.js';
import * as cluster from './cluster.js';
import * as dashboard from './dashboard.js';
import * as datasetConvert from './dataset-convert.js';
import * as jobList from './job-list.js';
import * as jobs from './jobs.js';
import * as recordioCat from './recordio-cat.js';
import * as recordioInspect from './recordio-inspect.js';

/** A command file: adds its commands to the program, writing through `io`. */
export interface CommandModule {
  register(program: Command, io: CliIo): void;
}

/** Every command of `tributary`, registered in this order (which is also the order in `--help`). */
export const COMMANDS: readonly CommandModule[] = [
  datasetConvert,
  recordioInspect,
  recordioCat,
  cluster,
  jobs,
  jobList,
  dashboard,
];
