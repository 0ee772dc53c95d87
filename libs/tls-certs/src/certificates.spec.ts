import { X509Certificate } from 'node:crypto';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { connect, createServer } from 'node:tls';
import { createCertificateAuthority } from './certificates.js';

describe('createCertificateAuthority', () => {
  it('issues leaf certificates that the CA verifies and that carry their names', async () => {
    const ca = await createCertificateAuthority('test-ca');
    const leaf = await ca.issue({ commonName: 'pserver', dnsNames: ['localhost'], ipAddresses: ['127.0.0.1'] });
    const caCert = new X509Certificate(ca.cert);
    const cert = new X509Certificate(leaf.cert);
    expect(caCert.ca).toBe(true);
    expect(cert.ca).toBe(false);
    expect(cert.verify(caCert.publicKey)).toBe(true);
    expect(cert.subject).toBe('CN=pserver');
    expect(cert.subjectAltName).toContain('DNS:localhost');
    expect(cert.subjectAltName).toContain('IP Address:127.0.0.1');
    const other = await createCertificateAuthority('other-ca');
    expect(cert.verify(new X509Certificate(other.cert).publicKey)).toBe(false);
  });

  it('makes certificates that pass a mutual TLS handshake, and one from another CA fails it', async () => {
    const ca = await createCertificateAuthority('test-ca');
    const server = await ca.issue({ commonName: 'server', ipAddresses: ['127.0.0.1'] });
    const client = await ca.issue({ commonName: 'client' });
    const stranger = await (await createCertificateAuthority('other-ca')).issue({ commonName: 'client' });
    const tlsServer = createServer({ ...server, ca: ca.cert, requestCert: true, rejectUnauthorized: true }, (socket) =>
      socket.end('hello'),
    );
    tlsServer.listen(0, '127.0.0.1');
    await once(tlsServer, 'listening');
    const port = (tlsServer.address() as AddressInfo).port;
    const talk = (pair: { cert: string; key: string }): Promise<string> =>
      new Promise((resolve, reject) => {
        const socket = connect({ host: '127.0.0.1', port, ca: ca.cert, ...pair }, () => undefined);
        let text = '';
        socket.on('data', (d: Buffer) => (text += d.toString()));
        socket.on('end', () => resolve(text));
        socket.on('error', reject);
      });
    try {
      await expect(talk(client)).resolves.toBe('hello');
      // TLS 1.3 refuses a client certificate after the client's side of the handshake is done:
      // the stranger sees an error or a closed socket, never the reply.
      await expect(talk(stranger).catch(() => 'refused')).resolves.not.toBe('hello');
    } finally {
      tlsServer.close();
    }
  });
});
