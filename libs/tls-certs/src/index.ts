/**
 * `#libs/tls-certs`: a private certificate authority and the leaf certificates it signs, made in
 * process (ECDSA P-256), for a secured local cluster and for tests of TLS paths.
 */
export { createCertificateAuthority } from './certificates.js';
export type { CertificateAuthority, LeafOptions, PemPair } from './certificates.js';
