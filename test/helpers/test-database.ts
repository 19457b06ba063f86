/**
 * Which store the suite runs on: SQLite in each data dir (the default), or PostgreSQL with
 * `ASSAY_TEST_STORE=postgres`, a database of its own per data dir, dropped when the test file's
 * process exits. The README's test command runs the suite both ways (docs/DEVELOPMENT.md).
 */
import { spawnSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';

export const TEST_STORE = process.env.ASSAY_TEST_STORE === 'postgres' ? 'postgres' : 'sqlite';
export const onPostgres = TEST_STORE === 'postgres';

/** The server the suite's databases are made on (trust auth on every machine here). */
const SERVER = process.env.ASSAY_TEST_POSTGRES ?? 'postgres://postgres@127.0.0.1:5432';

/** Set by scripts/run-tests.mjs per file run: it drops what carries it when the file ends. */
const PREFIX = process.env.ASSAY_TEST_DATABASE_PREFIX ?? 'assay_t_';

const created = new Set<string>();

function psql(database: string, statement: string): void {
  const result = spawnSync(
    'psql',
    [`${SERVER}/${database}`, '-v', 'ON_ERROR_STOP=1', '-qc', statement],
    {
      encoding: 'utf8',
    },
  );
  if (result.status !== 0) {
    throw new Error(`psql failed (${statement}): ${result.stderr || result.error?.message}`);
  }
}

process.on('exit', () => {
  for (const name of created) {
    try {
      psql('postgres', `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    } catch {
      // Left for the operator: the server is shared, and a failed drop must not fail the run.
    }
  }
});

/** A new, empty PostgreSQL database (whatever ASSAY_TEST_STORE says), dropped at exit; its URL. */
export function freshPostgresDatabase(): string {
  const name = `${PREFIX}${randomBytes(10).toString('hex')}`;
  psql('postgres', `CREATE DATABASE ${name}`);
  created.add(name);
  return `${SERVER}/${name}`;
}

/**
 * The variables that point a service or CLI using `dataDir` at its store: none on SQLite (the
 * data dir holds it), else `ASSAY_DATABASE_URL` of a database made for this data dir.
 */
export function storeEnv(dataDir: string): Record<string, string> {
  if (!onPostgres) return {};
  const name = `${PREFIX}${createHash('sha256').update(dataDir).digest('hex').slice(0, 20)}`;
  if (!created.has(name)) {
    psql('postgres', `CREATE DATABASE ${name}`);
    created.add(name);
  }
  return { ASSAY_DATABASE_URL: `${SERVER}/${name}` };
}
