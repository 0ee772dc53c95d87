import { hostname } from 'node:os';

/**
 * `host:port` as other machines should reach a server listening on `host`: the configured
 * advertise host when there is one, this machine's name for a wildcard address (`0.0.0.0`, `::`),
 * else the listening host itself; an IPv6 literal is bracketed.
 */
export function advertisedAddress(host: string, port: number, advertiseHost?: string): string {
  const name = advertiseHost ?? (isWildcard(host) ? hostname() : host);
  return `${name.includes(':') ? `[${name}]` : name}:${port}`;
}

function isWildcard(host: string): boolean {
  return host === '0.0.0.0' || host === '::' || host === '[::]';
}
