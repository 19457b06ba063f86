/**
 * Which store the suite runs on: SQLite in each data dir (the default), or PostgreSQL with
 * `ASSAY_TEST_STORE=postgres`, a database of its own per data dir. The README's test command runs
 * the suite both ways (docs/DEVELOPMENT.md).
 *
 * Databases are created without blocking: the process that creates them often runs the service
 * under test too, and a synchronous `psql` stalled its event loop. A data dir's database is made by
 * `await prepareStore(dataDir)`; synchronous helpers (assayCli) then find it with `storeEnv`.
 */
import { spawnSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import pg from 'pg';
import type { SettingName } from '../../src/settings.js';

export const TEST_STORE = process.env.ASSAY_TEST_STORE === 'postgres' ? 'postgres' : 'sqlite';
export const onPostgres = TEST_STORE === 'postgres';

/** The server the suite's databases are made on (trust auth on every machine here). */
const SERVER = process.env.ASSAY_TEST_POSTGRES ?? 'postgres://postgres@127.0.0.1:5432';

/** Set by scripts/run-tests.mjs per file run: it drops what carries it when the file ends. */
const RUNNER_PREFIX = process.env.ASSAY_TEST_DATABASE_PREFIX;
const PREFIX = RUNNER_PREFIX ?? 'assay_t_';

/**
 * The PostgreSQL pools of the services and CLIs the helpers build or start, unless a test sets its
 * own: the store's and pg-boss's. With pg-boss's LISTEN connection a process then takes at most 6
 * connections, not 15: several files run at once, some with several processes, and the server
 * allows 100 (docs/DEVELOPMENT.md).
 */
export const TEST_POOL_ENV: Readonly<Partial<Record<SettingName, string>>> = {
  ASSAY_DATABASE_POOL_SIZE: '3',
  ASSAY_DISPATCH_POOL_SIZE: '2',
};

/** Databases this process made, by name: the creation under way or done. */
const databases = new Map<string, Promise<void>>();
/** Those whose creation finished: what `storeEnv` may hand out. */
const created = new Set<string>();

let adminPool: pg.Pool | null = null;

/** One small pool on the server's `postgres` database, for CREATE DATABASE; it never holds exit. */
function admin(): pg.Pool {
  if (adminPool === null) {
    adminPool = new pg.Pool({
      connectionString: `${SERVER}/postgres`,
      application_name: 'assay-test-databases',
      max: 2,
      idleTimeoutMillis: 2_000,
      allowExitOnIdle: true,
    });
    // An idle connection ended by the server (a test that stops or empties PostgreSQL) is
    // replaced on the next use: nothing to do here, and unheard it would end the process.
    adminPool.on('error', () => {});
  }
  return adminPool;
}

function create(name: string): Promise<void> {
  let creation = databases.get(name);
  if (creation === undefined) {
    creation = admin()
      .query(`CREATE DATABASE ${name}`)
      .then(
        () => {
          created.add(name);
        },
        (error: unknown) => {
          databases.delete(name);
          throw new Error(`could not create the test database ${name}`, { cause: error });
        },
      );
    databases.set(name, creation);
  }
  return creation;
}

// In the runner's PostgreSQL pass, the runner drops the file's databases however the file ends.
// Otherwise (by hand, or a SQLite-pass file that makes one) they are dropped at exit, best effort,
// by one psql: asynchronous work cannot run in 'exit', and 'beforeExit' may come before the file's
// last `after` hooks have closed their stores.
if (RUNNER_PREFIX === undefined || !onPostgres) {
  process.on('exit', () => {
    if (created.size === 0) return;
    const drops = [...created].flatMap((name) => [
      '-c',
      `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`,
    ]);
    // Left for the operator when it fails: the server is shared, and a failed drop must not
    // fail the run.
    spawnSync('psql', [`${SERVER}/postgres`, '-q', ...drops], { stdio: 'ignore' });
  });
}

/** A new, empty PostgreSQL database (whatever ASSAY_TEST_STORE says), dropped at the end; its URL. */
export async function freshPostgresDatabase(): Promise<string> {
  const name = `${PREFIX}${randomBytes(10).toString('hex')}`;
  await create(name);
  return `${SERVER}/${name}`;
}

function databaseOf(dataDir: string): string {
  return `${PREFIX}${createHash('sha256').update(dataDir).digest('hex').slice(0, 20)}`;
}

/**
 * Makes the store of a service or CLI using `dataDir` ready, and returns the variables that point
 * it there: none on SQLite (the data dir holds it), else `ASSAY_DATABASE_URL` of a database made
 * for this data dir (once: later calls return the same).
 */
export async function prepareStore(dataDir: string): Promise<Record<string, string>> {
  if (!onPostgres) return {};
  await create(databaseOf(dataDir));
  return storeEnv(dataDir);
}

/**
 * The variables `prepareStore(dataDir)` returned, for synchronous code (assayCli); on PostgreSQL,
 * an error if that data dir's database was not made first.
 */
export function storeEnv(dataDir: string): Record<string, string> {
  if (!onPostgres) return {};
  const name = databaseOf(dataDir);
  if (!created.has(name)) {
    throw new Error(
      `no test database for ${dataDir} yet: await prepareStore(dataDir) first (or use a data dir of buildService, startServe or openTestStore)`,
    );
  }
  return { ASSAY_DATABASE_URL: `${SERVER}/${name}` };
}
