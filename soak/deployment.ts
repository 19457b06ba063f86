/**
 * Assay deployed on this machine for the soak (soak/run.ts) and the protocol fuzz (soak/fuzz.ts):
 * `embedded`, one process on SQLite; `scale-out`, 2 api processes and 2 workers on a PostgreSQL
 * database of its own (created here, dropped by stop()). Each has a managed clamd of its own.
 */
import { randomBytes } from 'node:crypto';
import { statSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { startOwnClamd } from '../bench/local-parts.js';
import { startAssay } from '../bench/service-process.js';
import type { ManagedClamd } from '../src/engines/clamav/managed-clamd.js';

export type DeploymentKind = 'embedded' | 'scale-out';
export type Started = Awaited<ReturnType<typeof startAssay>> & { name: string };

export interface Deployment {
  kind: DeploymentKind;
  /** In role order (`all`, or `api`, `api`, `worker`, `worker`); one started again replaces its own. */
  processes: Started[];
  apiUrls: string[];
  clamd: ManagedClamd;
  /** What every process was started with (ASSAY_DATABASE_URL on scale-out). */
  env: Record<string, string>;
  /** SIGKILLs these processes, then starts them again on their ports. */
  killAndRestart(indexes: number[]): Promise<void>;
  databaseBytes(): Promise<number>;
  /** Stops the processes and clamd, drops the database. `work` is the caller's to remove. */
  stop(): Promise<void>;
}

export interface DeploymentOptions {
  /** The caller's directory: clamd's and each process's data dir go under it. */
  work: string;
  /** Settings of every process. */
  env: Record<string, string>;
  /** The PostgreSQL server of scale-out's database, e.g. postgres://postgres@127.0.0.1:5432. */
  server: string;
  /** The database's name begins with it (assay_soak_, assay_fuzz_). */
  databasePrefix: string;
  /** A command that execs the service (see startAssay). */
  wrapper?: readonly string[];
}

export async function startDeployment(
  kind: DeploymentKind,
  options: DeploymentOptions,
): Promise<Deployment> {
  const { work, server } = options;
  const { clamd, socket } = await startOwnClamd(work, {
    maxFileSize: 100 * 1024 * 1024,
    officialDatabases: false,
  });
  const env = { ...options.env };
  const database = `${options.databasePrefix}${randomBytes(6).toString('hex')}`;
  let databaseBytes = async () => statSync(join(work, 'data', 'assay.db')).size;
  let sizer: pg.Pool | undefined;
  const processes: Started[] = [];
  const roles = kind === 'scale-out' ? ['api', 'api', 'worker', 'worker'] : ['all'];
  const dataDirOf = (i: number) =>
    kind === 'embedded' ? join(work, 'data') : join(work, `data-${i}`);
  const start = (i: number, port?: string) =>
    startAssay(
      socket,
      dataDirOf(i),
      {
        ...env,
        ASSAY_ROLE: roles[i] as string,
        ...(port === undefined ? {} : { ASSAY_PORT: port }),
      },
      options.wrapper,
    );
  const stop = async () => {
    for (const p of processes) p.child.kill('SIGTERM');
    await sleep(2000);
    await clamd.stop();
    await sizer?.end().catch(() => {});
    if (kind === 'scale-out') {
      const cleanup = new pg.Client(`${server}/postgres`);
      await cleanup.connect().catch(() => {});
      await cleanup.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`).catch(() => {});
      await cleanup.end().catch(() => {});
    }
  };
  try {
    if (kind === 'scale-out') {
      const admin = new pg.Client(`${server}/postgres`);
      await admin.connect();
      await admin.query(`CREATE DATABASE ${database}`);
      await admin.end();
      env.ASSAY_DATABASE_URL = `${server}/${database}`;
      sizer = new pg.Pool({ connectionString: env.ASSAY_DATABASE_URL, max: 1 });
      // Its connection ends when PostgreSQL restarts (chaos) or the database is dropped: not fatal.
      sizer.on('error', () => {});
      const pool = sizer;
      databaseBytes = async () =>
        Number(
          (await pool.query('SELECT pg_database_size(current_database()) AS n')).rows[0]?.n ?? 0,
        );
    }
    for (const [i, role] of roles.entries()) {
      processes.push({ ...(await start(i)), name: `${role} ${i}` });
    }
  } catch (error) {
    await stop();
    throw error;
  }
  return {
    kind,
    processes,
    apiUrls: processes.filter((p) => !p.name.startsWith('worker')).map((p) => p.url),
    clamd,
    env,
    async killAndRestart(indexes) {
      for (const i of indexes) processes[i]?.child.kill('SIGKILL');
      await sleep(2000);
      for (const i of indexes) {
        const old = processes[i] as Started;
        processes[i] = { ...(await start(i, new URL(old.url).port)), name: old.name };
      }
    },
    databaseBytes: () => databaseBytes(),
    stop,
  };
}
