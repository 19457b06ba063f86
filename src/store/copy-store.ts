import type { Kysely } from 'kysely';
import type { Database } from './schema.js';
import type { Store } from './store.js';

/** Rows read and written per round trip: well under PostgreSQL's 65,535 parameters per statement. */
const PAGE_ROWS = 500;

/**
 * The tables in an order that satisfies foreign keys, each with the columns of its key: pages are
 * read in key order (keyset pagination), so a large table is never held whole.
 */
const TABLES = [
  { table: 'accounts', key: ['id'] },
  { table: 'api_keys', key: ['id'] },
  { table: 'users', key: ['account_id', 'email'] },
  { table: 'tokens', key: ['id'] },
  { table: 'files', key: ['id'] },
  // By result, then in order: a result's events are contiguous, so each is decided once.
  { table: 'trace_events', key: ['file_id', 'seq'] },
  { table: 'jobs', key: ['id'] },
  { table: 'job_contents', key: ['job_id'] },
  { table: 'callback_deliveries', key: ['id'] },
] as const satisfies ReadonlyArray<{ table: keyof Database; key: readonly string[] }>;

export type CopiedTable = (typeof TABLES)[number]['table'];

export interface TableCopy {
  table: CopiedTable;
  /** Rows in the source. */
  total: number;
  copied: number;
  /** Rows the target had already (same key): kept as they were. */
  skipped: number;
}

// biome-ignore lint/suspicious/noExplicitAny: one generic loop over every table's rows, whatever their columns
type AnyDb = Kysely<any>;
type Row = Record<string, unknown>;

/** Whether the target holds any account, result or job: copying into it needs consent. */
export async function holdsData(store: Store): Promise<boolean> {
  for (const table of ['accounts', 'files', 'jobs'] as const) {
    const row = await store.db.selectFrom(table).select('id').limit(1).executeTakeFirst();
    if (row !== undefined) return true;
  }
  return false;
}

/**
 * Copies every row of `source` into `target` (both migrated to the same version), table by table,
 * calling `progress` after each page. Rows whose key the target has already are skipped, and so
 * are the trace events of results it has already: running it again adds only what is missing.
 * Trace events get the target's own sequence numbers, in the source's order.
 */
export async function copyStore(
  source: Store,
  target: Store,
  progress: (copy: TableCopy) => void = () => {},
): Promise<TableCopy[]> {
  const from = source.db as AnyDb;
  const to = target.db as AnyDb;
  const copies: TableCopy[] = [];
  for (const { table, key } of TABLES) {
    const counted = await from
      .selectFrom(table)
      .select((eb) => eb.fn.countAll<number>().as('rows'))
      .executeTakeFirstOrThrow();
    const copy: TableCopy = { table, total: Number(counted.rows), copied: 0, skipped: 0 };
    progress(copy);
    let after: Row | null = null;
    const decided = new Map<string, boolean>();
    for (;;) {
      let query = from.selectFrom(table).selectAll();
      if (after !== null) {
        const last: Row = after;
        query = query.where(({ eb, refTuple, tuple }) =>
          key.length === 1
            ? eb(key[0] as string, '>', last[key[0] as string])
            : eb(
                refTuple(key[0] as string, key[1] as string),
                '>',
                tuple(last[key[0] as string], last[key[1] as string]),
              ),
        );
      }
      for (const column of key) query = query.orderBy(column);
      const rows = (await query.limit(PAGE_ROWS).execute()) as Row[];
      if (rows.length === 0) break;
      after = rows[rows.length - 1] ?? null;
      const written = await writePage(to, table, rows, decided);
      copy.copied += written;
      copy.skipped += rows.length - written;
      progress(copy);
    }
    copies.push(copy);
  }
  return copies;
}

/**
 * Writes one page; returns the rows written. `decided` remembers, for trace events, whether the
 * result a page ends in is being copied (its events may go on in the next page).
 */
async function writePage(
  to: AnyDb,
  table: CopiedTable,
  rows: Row[],
  decided: Map<string, boolean>,
): Promise<number> {
  if (table === 'trace_events') {
    // No key of their own to compare: skip the events of results the target has events of.
    const undecided = [...new Set(rows.map((row) => row.file_id as string))].filter(
      (id) => !decided.has(id),
    );
    const present = new Set(
      undecided.length === 0
        ? []
        : (
            await to
              .selectFrom('trace_events')
              .select('file_id')
              .distinct()
              .where('file_id', 'in', undecided)
              .execute()
          ).map((row: Row) => row.file_id as string),
    );
    for (const id of undecided) decided.set(id, !present.has(id));
    const missing = rows
      .filter((row) => decided.get(row.file_id as string) === true)
      .map(({ seq: _seq, ...row }) => row);
    // Only the last result's events can go on in the next page.
    const last = rows[rows.length - 1]?.file_id as string;
    const copying = decided.get(last) === true;
    decided.clear();
    decided.set(last, copying);
    if (missing.length > 0) await to.insertInto('trace_events').values(missing).execute();
    return missing.length;
  }
  const result = await to
    .insertInto(table)
    .values(rows)
    .onConflict((conflict) => conflict.doNothing())
    .executeTakeFirst();
  return Number(result.numInsertedOrUpdatedRows ?? 0n);
}
