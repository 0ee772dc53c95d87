import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** What `tributary up` records of the dashboard it serves, beside the cluster file. */
export interface DashboardFile {
  url: string;
  /** The `up` process that serves it. */
  supervisorPid: number;
}

/** Path of the dashboard file under a cluster's state directory. */
export function dashboardFilePath(stateDir: string): string {
  return join(stateDir, 'dashboard.json');
}

/** Records where the cluster's dashboard is served. */
export function writeDashboardFile(stateDir: string, file: DashboardFile): void {
  writeFileSync(dashboardFilePath(stateDir), JSON.stringify(file, null, 2));
}

/** Reads the dashboard file, or undefined when the cluster serves none. */
export function readDashboardFile(stateDir: string): DashboardFile | undefined {
  try {
    return JSON.parse(readFileSync(dashboardFilePath(stateDir), 'utf8')) as DashboardFile;
  } catch {
    return undefined;
  }
}

/** Forgets the dashboard (the cluster stopped). */
export function removeDashboardFile(stateDir: string): void {
  rmSync(dashboardFilePath(stateDir), { force: true });
}
