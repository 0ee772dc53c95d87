import { NATS_ROLES, ROLE_PERMISSIONS, type NatsRole } from '#libs/messaging';

/** What a secured nats-server needs: its TLS files and each role's password. */
export interface NatsServerSecurity {
  /** The server's certificate, its key, and the CA that client certificates must chain to. */
  certFile: string;
  keyFile: string;
  caFile: string;
  /** Each role's password as a configuration value: a quoted string, or `$VARIABLE`. */
  passwords: Record<NatsRole, string>;
  /** Where the server logs (permission violations included); standard error when unset. */
  logFile?: string;
}

/** Path of the shipped configuration, relative to the repository root. */
export const NATS_DEPLOYMENT_CONFIG_PATH = 'deploy/nats/secure.conf';

/** A string as a nats-server configuration value. */
export function natsConfigString(value: string): string {
  return JSON.stringify(value);
}

/**
 * The security part of a nats-server configuration: TLS with client certificates required
 * (`verify`), and one user per role with {@link ROLE_PERMISSIONS}; an anonymous client is refused.
 */
export function natsServerSecurityConfig(s: NatsServerSecurity): string {
  const list = (subjects: string[]) =>
    `[\n${subjects.map((subject) => `          ${natsConfigString(subject)}`).join(',\n')}\n        ]`;
  const users = NATS_ROLES.map((role) => {
    const p = ROLE_PERMISSIONS[role];
    return [
      `    {`,
      `      user: ${natsConfigString(role)}`,
      `      password: ${s.passwords[role]}`,
      `      permissions: {`,
      `        publish: { allow: ${list(p.publish)} }`,
      `        subscribe: { allow: ${list(p.subscribe)} }`,
      ...(p.allowResponses ? [`        allow_responses: true`] : []),
      `      }`,
      `    }`,
    ].join('\n');
  });
  return [
    ...(s.logFile ? [`log_file: ${natsConfigString(s.logFile)}`] : []),
    'tls {',
    `  cert_file: ${natsConfigString(s.certFile)}`,
    `  key_file: ${natsConfigString(s.keyFile)}`,
    `  ca_file: ${natsConfigString(s.caFile)}`,
    '  verify: true',
    '  timeout: 5',
    '}',
    'authorization {',
    '  users: [',
    users.join('\n'),
    '  ]',
    '}',
    '',
  ].join('\n');
}

/** The environment variable the shipped configuration reads `role`'s password from. */
export function natsPasswordVariable(role: NatsRole): string {
  return `TRIBUTARY_NATS_${role.toUpperCase()}_PASSWORD`;
}

/**
 * The shipped configuration ({@link NATS_DEPLOYMENT_CONFIG_PATH}) for a NATS server of one's own:
 * TLS files under `/etc/nats/tls/`, each role's password from `$TRIBUTARY_NATS_<ROLE>_PASSWORD`.
 * Include it from the server's main configuration, which sets ports, JetStream and clustering.
 */
export function natsDeploymentConfig(): string {
  const header = [
    `# Tributary's roles on a NATS server: TLS with client certificates, one user per role, each`,
    `# allowed only the subjects it needs. Generated from libs/messaging/src/role-permissions.ts;`,
    `# do not edit (a test checks it). Include it from your nats-server.conf, then set`,
    `# ${NATS_ROLES.map(natsPasswordVariable).join(', ')}`,
    `# in nats-server's environment and put server.pem, server-key.pem and ca.pem in /etc/nats/tls/.`,
    '',
  ];
  const passwords = Object.fromEntries(NATS_ROLES.map((role) => [role, `$${natsPasswordVariable(role)}`]));
  return (
    header.join('\n') +
    natsServerSecurityConfig({
      certFile: '/etc/nats/tls/server.pem',
      keyFile: '/etc/nats/tls/server-key.pem',
      caFile: '/etc/nats/tls/ca.pem',
      passwords: passwords as Record<NatsRole, string>,
    })
  );
}
