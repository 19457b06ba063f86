import { execFileSync } from 'node:child_process';
import { join } from 'node:path';

/**
 * Writes a throwaway self-signed certificate for localhost and 127.0.0.1 into `dir` (openssl, an
 * EC key, valid one day) and returns the paths of its PEM files.
 */
export function writeSelfSignedCertificate(dir: string): { cert: string; key: string } {
  const cert = join(dir, 'cert.pem');
  const key = join(dir, 'key.pem');
  execFileSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:prime256v1',
      '-nodes',
      '-keyout',
      key,
      '-out',
      cert,
      '-days',
      '1',
      '-subj',
      '/CN=localhost',
      '-addext',
      'subjectAltName=DNS:localhost,IP:127.0.0.1',
    ],
    { stdio: 'pipe' },
  );
  return { cert, key };
}
