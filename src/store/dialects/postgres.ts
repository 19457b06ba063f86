import { createHash } from 'node:crypto';
import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import { PREPARED_MARK } from '../prepared.js';
import type { Database } from '../schema.js';
import { Store } from '../store.js';

const INT8_OID = 20;
const NUMERIC_OID = 1700;

/**
 * pg hands back `bigint` (and the `numeric` of a SUM over one) as strings, to keep precision.
 * Every such column here holds counts, bytes or credits, far below 2^53: numbers, as on SQLite.
 */
const types = {
  getTypeParser(oid: number, format?: 'text' | 'binary') {
    if (oid === INT8_OID || oid === NUMERIC_OID) return (value: string) => Number(value);
    return pg.types.getTypeParser(oid, format);
  },
};

export interface PostgresStoreOptions {
  /** Connections in the pool. */
  poolSize: number;
  /** Errors of idle connections (the server restarted, the network dropped): logged, not fatal. */
  onConnectionError: (error: Error) => void;
}

/** Opens the PostgreSQL database at `url` and migrates it (Kysely's migrator holds a lock). */
export async function openPostgresStore(
  url: string,
  options: PostgresStoreOptions,
): Promise<Store> {
  const pool = new pg.Pool({
    connectionString: url,
    // Tells the store's connections from pg-boss's (assay-dispatch) in pg_stat_activity.
    application_name: 'assay-store',
    max: options.poolSize,
    types,
    // A request waits at most this long for a connection; a server that is down answers at once.
    connectionTimeoutMillis: 10_000,
    idleTimeoutMillis: 30_000,
  });
  // An idle client's error is emitted on the pool: unhandled, it would end the process.
  pool.on('error', options.onConnectionError);
  // A checked-out client (a transaction, between its statements or in its rollback) has no pool
  // listener: a connection dropped then emits 'error' on the client, and unheard that ends the
  // process (issue 25). The statement under way, or the next one, rejects with the same failure,
  // which fails the transaction as store-unavailable; pg-pool discards a client that is no longer
  // queryable when it is released. So this listener has nothing more to do.
  pool.on('connect', (client) => {
    client.on('error', ignoreCheckedOutError);
    prepareMarkedStatements(client);
  });
  const store = new Store(new Kysely<Database>({ dialect: new PostgresDialect({ pool }) }));
  try {
    await store.migrate();
  } catch (error) {
    await store.close();
    throw error;
  }
  return store;
}

function ignoreCheckedOutError(): void {}

/**
 * Statements whose text starts with PREPARED_MARK are sent as named prepared statements (the name a
 * digest of the text): each connection parses them once, and PostgreSQL plans them once its
 * generic plan is as good as a custom one. Kysely sends every query unnamed, parsed and planned
 * anew: for the hot statements of a worker (a group's results, its claims, its verdict lookups)
 * planning was a third of PostgreSQL's time (pg_stat_statements, issue 28).
 */
function prepareMarkedStatements(client: pg.PoolClient): void {
  const query = client.query.bind(client) as (...args: unknown[]) => unknown;
  const names = new Map<string, string>();
  const marked = (...args: unknown[]) => {
    const [text, values] = args;
    if (typeof text !== 'string' || !text.startsWith(PREPARED_MARK)) return query(...args);
    let name = names.get(text);
    if (name === undefined) {
      name = `assay_${createHash('sha1').update(text).digest('hex').slice(0, 20)}`;
      names.set(text, name);
    }
    return query({ name, text, values }, ...args.slice(2));
  };
  (client as unknown as { query: typeof marked }).query = marked;
}
