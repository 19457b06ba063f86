import { join, resolve } from 'node:path';
import type { Logger } from 'pino';
import type { Config } from '../config.js';
import { clamdInDataDir } from '../engine-setup.js';
import { hasOnlyOwnSignatures } from '../engines/clamav/signatures.js';
import { packageVersion } from '../paths.js';

/** Said when clamd has loaded only Assay's own signatures (signatures/). */
const TEST_SIGNATURES_ONLY =
  'clamd has only Assay\'s test signatures: it detects test files (EICAR), not real malware; add ClamAV\'s official databases (docs/OPERATIONS.md, "ClamAV and signatures")';

/** Where things are once the service serves: what a person opens, and what they should know. */
interface WhereThingsAre {
  url: string;
  /** The console and the API's reference page; none for a worker, which serves only /health. */
  console?: string;
  docs?: string;
  store: string;
  /** The ICAP listener, where it is on. */
  icap?: string;
  warning?: string;
}

/** The store, without credentials: SQLite's folder, or PostgreSQL's host and database. */
function describeStore(config: Config): string {
  if (config.databaseUrl === '') return `SQLite in ${resolve(config.dataDir)}`;
  const url = new URL(config.databaseUrl);
  return `PostgreSQL at ${url.host}${url.pathname}`;
}

/** The URLs, the store, and a warning when the managed clamd has only the test signatures. */
async function whereThingsAre(config: Config, url: string): Promise<WhereThingsAre> {
  // The data dir's managed clamd says what it loaded in its state file, beside its socket.
  const onlyTest =
    clamdInDataDir(config) && (await hasOnlyOwnSignatures(join(config.dataDir, 'clamd'))) === true;
  return {
    url,
    ...(config.role === 'worker' ? {} : { console: `${url}/console`, docs: `${url}/docs` }),
    store: describeStore(config),
    ...(onlyTest ? { warning: TEST_SIGNATURES_ONLY } : {}),
  };
}

/** The banner a terminal shows: a few lines a person reads at once. */
function banner(where: WhereThingsAre): string {
  // A worker serves only /health.
  const served: [string, string] =
    where.console === undefined ? ['Health', `${where.url}/health`] : ['API', where.url];
  const rows: Array<[string, string | undefined]> = [
    served,
    ['Console', where.console],
    ['API docs', where.docs],
    ['ICAP', where.icap],
    ['Store', where.store],
  ];
  const lines = [
    `Assay ${packageVersion()} is serving (Ctrl-C stops it)`,
    ...rows.flatMap(([name, value]) =>
      value === undefined ? [] : [`  ${name.padEnd(9)}${value}`],
    ),
    ...(where.warning === undefined ? [] : [`Warning: ${where.warning}`]),
  ];
  return `\n${lines.join('\n')}\n\n`;
}

/**
 * Says the service serves, and where things are: one log line (a warning when clamd has only the
 * test signatures), and on a terminal a banner too, which a person reads among the JSON lines.
 */
export async function announceServing(
  logger: Logger,
  config: Config,
  url: string,
  fields: Record<string, unknown> = {},
): Promise<void> {
  const where = await whereThingsAre(config, url).catch((error: unknown): WhereThingsAre => {
    logger.warn({ err: error }, 'could not read what clamd loaded');
    return { url, store: describeStore(config) };
  });
  if (typeof fields.icap === 'string') where.icap = fields.icap;
  const line = { ...where, dataDir: config.dataDir, role: config.role, ...fields };
  if (where.warning === undefined) logger.info(line, 'assay is serving');
  else logger.warn(line, 'assay is serving');
  if (process.stdout.isTTY) process.stdout.write(banner(where));
}
