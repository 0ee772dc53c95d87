import { readFileSync } from 'node:fs';

/**
 * The CPUs of a Linux CPU list as the kernel writes it (`Cpus_allowed_list`: `0-3,8,10-11`), in
 * order.
 * @throws RangeError naming the list when it is not one.
 */
export function parseCpuList(list: string): number[] {
  const cpus: number[] = [];
  for (const part of list.trim().split(',')) {
    const range = /^(\d+)(?:-(\d+))?$/.exec(part);
    const first = Number(range?.[1]);
    const last = range?.[2] === undefined ? first : Number(range[2]);
    if (range === null || last < first) throw new RangeError(`"${list}" is not a CPU list (such as 0-3,8)`);
    for (let cpu = first; cpu <= last; cpu++) cpus.push(cpu);
  }
  return cpus;
}

/** `cpus` as the kernel writes a CPU list: runs of consecutive CPUs as ranges (`0-3,8,10-11`). */
export function formatCpuList(cpus: readonly number[]): string {
  const sorted = [...new Set(cpus)].sort((a, b) => a - b);
  const parts: string[] = [];
  for (let i = 0; i < sorted.length;) {
    let j = i;
    while (j + 1 < sorted.length && sorted[j + 1] === sorted[j]! + 1) j++;
    parts.push(j === i ? String(sorted[i]) : `${sorted[i]}-${sorted[j]}`);
    i = j + 1;
  }
  return parts.join(',');
}

/** The CPUs this process may run on (Linux), or why they are not known. */
export function allowedCpus(statusFile = '/proc/self/status'): number[] | { unknown: string } {
  let status: string;
  try {
    status = readFileSync(statusFile, 'utf8');
  } catch (err) {
    return { unknown: `${statusFile} cannot be read (${(err as Error).message}): not Linux?` };
  }
  const line = /^Cpus_allowed_list:\s*(\S+)\s*$/m.exec(status);
  if (line === null) return { unknown: `${statusFile} has no Cpus_allowed_list` };
  return parseCpuList(line[1]!);
}
