import 'reflect-metadata';
import { webcrypto } from 'node:crypto';
import * as x509 from '@peculiar/x509';

x509.cryptoProvider.set(webcrypto as unknown as Parameters<typeof x509.cryptoProvider.set>[0]);

/** ECDSA on P-256 with SHA-256: short keys, fast to make, accepted by Node, NATS and Redis. */
const KEY_ALGORITHM: webcrypto.EcKeyGenParams & webcrypto.EcdsaParams = {
  name: 'ECDSA',
  namedCurve: 'P-256',
  hash: 'SHA-256',
};
const DAY_MS = 86_400_000;

/** A certificate and its private key, both PEM. */
export interface PemPair {
  /** The certificate, PEM. */
  cert: string;
  /** Its private key, PKCS#8 PEM. */
  key: string;
}

/** A certificate authority that can sign leaf certificates. */
export interface CertificateAuthority extends PemPair {
  /** Signs a leaf certificate for `subject` (see {@link LeafOptions}). */
  issue(options: LeafOptions): Promise<PemPair>;
}

/** What a leaf certificate is for. */
export interface LeafOptions {
  /** Common name, e.g. `pserver` or `trainer`; also the identity a server sees in mutual TLS. */
  commonName: string;
  /** DNS names it is valid for (server certificates). */
  dnsNames?: string[];
  /** IP addresses it is valid for (server certificates). */
  ipAddresses?: string[];
  /** Days it stays valid (default 365). */
  days?: number;
}

function serialNumber(): string {
  const bytes = webcrypto.getRandomValues(new Uint8Array(16));
  bytes[0] &= 0x7f; // a positive serial
  return Buffer.from(bytes).toString('hex');
}

async function pkcs8Pem(key: webcrypto.CryptoKey): Promise<string> {
  const der = await webcrypto.subtle.exportKey('pkcs8', key);
  return x509.PemConverter.encode(der, 'PRIVATE KEY');
}

function validity(days: number): { notBefore: Date; notAfter: Date } {
  const now = Date.now();
  return { notBefore: new Date(now - 60_000), notAfter: new Date(now + days * DAY_MS) };
}

/**
 * Makes a fresh certificate authority (`CN=<name>`), valid `days` days, able to issue leaf
 * certificates usable both as TLS server and as TLS client certificates.
 */
export async function createCertificateAuthority(name: string, days = 3650): Promise<CertificateAuthority> {
  const keys = (await webcrypto.subtle.generateKey(KEY_ALGORITHM, true, ['sign', 'verify'])) as webcrypto.CryptoKeyPair;
  const caCert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: serialNumber(),
    name: `CN=${name}`,
    ...validity(days),
    keys,
    signingAlgorithm: KEY_ALGORITHM,
    extensions: [
      new x509.BasicConstraintsExtension(true, 0, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
      await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
    ],
  });
  const caKeyPem = await pkcs8Pem(keys.privateKey);

  const issue = async (options: LeafOptions): Promise<PemPair> => {
    const leafKeys = (await webcrypto.subtle.generateKey(KEY_ALGORITHM, true, [
      'sign',
      'verify',
    ])) as webcrypto.CryptoKeyPair;
    const altNames: x509.JsonGeneralName[] = [
      ...(options.dnsNames ?? []).map((value) => ({ type: 'dns' as const, value })),
      ...(options.ipAddresses ?? []).map((value) => ({ type: 'ip' as const, value })),
    ];
    const cert = await x509.X509CertificateGenerator.create({
      serialNumber: serialNumber(),
      subject: `CN=${options.commonName}`,
      issuer: caCert.subject,
      ...validity(options.days ?? 365),
      publicKey: leafKeys.publicKey,
      signingKey: keys.privateKey,
      signingAlgorithm: KEY_ALGORITHM,
      extensions: [
        new x509.BasicConstraintsExtension(false, undefined, true),
        new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature | x509.KeyUsageFlags.keyEncipherment, true),
        new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth, x509.ExtendedKeyUsage.clientAuth]),
        ...(altNames.length > 0 ? [new x509.SubjectAlternativeNameExtension(altNames)] : []),
        await x509.AuthorityKeyIdentifierExtension.create(caCert),
      ],
    });
    return { cert: cert.toString('pem'), key: await pkcs8Pem(leafKeys.privateKey) };
  };

  return { cert: caCert.toString('pem'), key: caKeyPem, issue };
}
