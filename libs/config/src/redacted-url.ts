/**
 * A server URL (or a comma-separated list of them) fit for logs: a password or token in the
 * user part is replaced by `***`, so a URL can be quoted without leaking its secret.
 */
export function redactedUrl(urls: string): string {
  return urls
    .split(',')
    .map((raw) => {
      const u = raw.trim();
      try {
        const parsed = new URL(u);
        if (!parsed.username && !parsed.password) return u;
        // `nats://token@host` carries the secret as the user part.
        if (parsed.password) parsed.password = '***';
        else parsed.username = '***';
        return parsed.toString().replace(/\/$/, '');
      } catch {
        return u.replace(/\/\/[^@/]*@/, '//***@');
      }
    })
    .join(',');
}
