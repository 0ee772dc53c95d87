import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';

/** Start of every name (namespaces, bridge, veths) the multi-host tests make, so stale ones can be found. */
export const NETNS_PREFIX = 'trmh';

/** One simulated machine: a network namespace with one address on the test's bridge. */
export interface NetnsHost {
  /** Short label (`a`, `b`, ...). */
  label: string;
  /** Namespace name. */
  ns: string;
  /** The host's address on the bridge. */
  address: string;
  /** The veth end left on the bridge: setting it down cuts the host off the network. */
  link: string;
  /** Words that run a command inside the host: `ip netns exec <ns>`. */
  exec: string[];
}

/** A bridge with simulated machines on it, made by {@link createNetnsHosts}. */
export interface NetnsNetwork {
  hosts: NetnsHost[];
  /** The bridge's own address (this process reaches every host through it). */
  gateway: string;
  /** Cuts a host off the network (its link goes down) or puts it back. */
  setConnected(host: NetnsHost, connected: boolean): void;
  /** Deletes the namespaces, the veths and the bridge (best effort: each step runs). */
  remove(): void;
}

function ip(...args: string[]): string {
  return execFileSync('ip', args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
}

/**
 * Fails loudly unless this process can make network namespaces (it must run as root with
 * iproute2): the multi-host test is meant to run, never to be skipped.
 */
export function requireNetns(): void {
  const uid = process.getuid?.();
  if (uid !== 0) {
    throw new Error(`the multi-host test makes network namespaces and must run as root (uid is ${uid})`);
  }
  try {
    ip('netns', 'list');
  } catch (cause) {
    throw new Error('the multi-host test needs `ip netns` (iproute2); install it', { cause });
  }
}

/**
 * Deletes namespaces and links left by an earlier run that crashed: every one named with
 * {@link NETNS_PREFIX} whose namespace runs no process (a run in progress keeps its own).
 */
export function removeStaleNetns(): void {
  const namespaces = ip('netns', 'list')
    .split('\n')
    .map((line) => line.split(' ')[0])
    .filter((name) => name.startsWith(NETNS_PREFIX));
  const busy = new Set<string>();
  for (const ns of namespaces) {
    if (ip('netns', 'pids', ns).trim() !== '') busy.add(ns.slice(0, NETNS_PREFIX.length + 4));
    else tryIp('netns', 'del', ns);
  }
  const links = ip('-o', 'link', 'show')
    .split('\n')
    .map((line) => line.split(':')[1]?.trim().split('@')[0])
    .filter((name): name is string => name !== undefined && name.startsWith(NETNS_PREFIX));
  for (const link of links) if (!busy.has(link.slice(0, NETNS_PREFIX.length + 4))) tryIp('link', 'del', link);
}

function tryIp(...args: string[]): void {
  try {
    ip(...args);
  } catch {
    // Already gone.
  }
}

/**
 * Makes `labels.length` namespaces on a fresh bridge in this (root) namespace, with a random
 * suffix in every name and a random 10.77.x.0/24 subnet: host i gets 10.77.x.(i+1), the bridge
 * 10.77.x.254. Each namespace has its loopback up, so a service binding 127.0.0.1 sees only
 * its own host's.
 */
export function createNetnsHosts(labels: string[]): NetnsNetwork {
  const run = `${NETNS_PREFIX}${randomBytes(2).toString('hex')}`;
  const subnet = `10.77.${1 + (randomBytes(1)[0] % 250)}`;
  const bridge = `${run}br`;
  const gateway = `${subnet}.254`;
  const hosts: NetnsHost[] = labels.map((label, i) => ({
    label,
    ns: `${run}-${label}`,
    address: `${subnet}.${i + 1}`,
    link: `${run}-${label}`,
    exec: ['ip', 'netns', 'exec', `${run}-${label}`],
  }));
  const network: NetnsNetwork = {
    hosts,
    gateway,
    setConnected(host, connected) {
      ip('link', 'set', host.link, connected ? 'up' : 'down');
    },
    remove() {
      for (const host of hosts) {
        tryIp('netns', 'del', host.ns);
        tryIp('link', 'del', host.link);
      }
      tryIp('link', 'del', bridge);
    },
  };
  try {
    ip('link', 'add', bridge, 'type', 'bridge');
    ip('addr', 'add', `${gateway}/24`, 'dev', bridge);
    ip('link', 'set', bridge, 'up');
    for (const host of hosts) {
      const peer = `${run}-${host.label}p`;
      ip('netns', 'add', host.ns);
      ip('link', 'add', host.link, 'type', 'veth', 'peer', 'name', peer);
      ip('link', 'set', host.link, 'master', bridge);
      ip('link', 'set', host.link, 'up');
      ip('link', 'set', peer, 'netns', host.ns);
      ip('-n', host.ns, 'link', 'set', peer, 'name', 'eth0');
      ip('-n', host.ns, 'addr', 'add', `${host.address}/24`, 'dev', 'eth0');
      ip('-n', host.ns, 'link', 'set', 'eth0', 'up');
      ip('-n', host.ns, 'link', 'set', 'lo', 'up');
    }
  } catch (err) {
    network.remove();
    throw err;
  }
  return network;
}
