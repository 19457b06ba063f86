/**
 * Parts the benchmarks and the soak run for themselves on this machine: a clamd of their own, and
 * the machine's PostgreSQL cluster stopped and started (for fault scenarios; needs root).
 */
import { execFileSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { pino } from 'pino';
import { findClamdBinary, ManagedClamd } from '../src/engines/clamav/managed-clamd.js';

/**
 * A managed clamd (started again if it dies) under `dir`, with Assay's own signatures (and the
 * official ones only if `officialDatabases`); its unix socket.
 */
export async function startOwnClamd(
  dir: string,
  options: { maxFileSize?: number; officialDatabases?: boolean } = {},
): Promise<{ clamd: ManagedClamd; socket: string }> {
  const clamdPath = findClamdBinary();
  if (clamdPath === null) throw new Error('clamd is not installed: run ./setup.sh');
  const clamd = new ManagedClamd({
    dataDir: join(dir, 'clamd'),
    clamdPath,
    maxFileSize: options.maxFileSize ?? 200 * 1024 * 1024,
    ...(options.officialDatabases === false
      ? { systemDatabaseDir: join(dir, 'no-official-databases') }
      : {}),
    logger: pino({ level: 'warn' }),
  });
  await clamd.start();
  return { clamd, socket: clamd.address.kind === 'unix' ? clamd.address.path : '' };
}

/** `pg_ctlcluster` on the machine's cluster: stop (fast) or start. Stops it for everyone. */
export function postgresCtl(action: 'stop' | 'start'): void {
  const cluster = readdirSync('/etc/postgresql')[0] ?? '';
  execFileSync('pg_ctlcluster', [
    '--skip-systemctl-redirect',
    cluster,
    'main',
    action,
    ...(action === 'stop' ? ['-m', 'fast'] : []),
  ]);
}
