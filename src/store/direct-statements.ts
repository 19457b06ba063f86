import type { Kysely, QueryResult } from 'kysely';
import type { Database } from './schema.js';

/**
 * Runs a compiled statement at once on a store's one connection, past Kysely's executor (its
 * connection provider, mutex and result transforms: a dozen promises and ~14 KB of garbage per
 * statement, more than SQLite's own work on a small write). Offered by the SQLite store only.
 */
export interface DirectStatements {
  /** Whether a transaction is open on the connection now. */
  readonly inTransaction: boolean;
  /** Whether `sql` only reads. */
  reads(sql: string): boolean;
  run<Row>(sql: string, parameters: readonly unknown[]): QueryResult<Row>;
}

/** By the dialect adapter a store's Kysely instance and all its transactions share. */
const offered = new WeakMap<object, DirectStatements>();

export function offerDirectStatements(adapter: object, statements: DirectStatements): void {
  offered.set(adapter, statements);
}

/**
 * The direct runner for `sql` on `db`, where it gives the same answer: inside a transaction, whose
 * callback holds the connection until it ends; outside one, a read while no transaction is open
 * (it would see that one's uncommitted rows; Kysely's mutex would have waited for its end). Null
 * elsewhere: Kysely runs the statement.
 */
export function directStatementsOf(db: Kysely<Database>, sql: string): DirectStatements | null {
  const direct = offered.get(db.getExecutor().adapter);
  if (direct === undefined) return null;
  if (db.isTransaction) return direct;
  return !direct.inTransaction && direct.reads(sql) ? direct : null;
}
