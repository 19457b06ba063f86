import type { Kysely } from 'kysely';
import type { Database } from './schema.js';

/** The kinds of background work a store row can be due for: a job's stage, or a callback. */
export type WorkKind = 'download' | 'scan' | 'callback';

/** A row (a job or a callback delivery) that is due at `at`, for the account that owns it. */
export interface DueWork {
  kind: WorkKind;
  id: string;
  accountId: string;
  /** ISO time from which the work may run. */
  at: string;
  /**
   * How many of the account's other work of this kind is waiting or running (bounded): due work is
   * taken lowest rank first, then oldest, so accounts take turns instead of first come, first served.
   */
  rank?: number;
  /**
   * The row was made due sooner than it was announced for (a callback retried now): an
   * announcement already waiting is moved to `at` instead of being kept as it is.
   */
  sooner?: boolean;
}

/**
 * Where a store announces work that became due, inside the transaction that made it due, so the
 * announcement commits with the row or not at all. The embedded store has none (its runner reads
 * the due list itself); on PostgreSQL it sends a pg-boss message (src/queue).
 */
export interface WorkDispatch {
  send(db: Kysely<Database>, work: DueWork): Promise<void>;
  /** `send` for several rows at once, in `db`'s transaction (fewer statements). */
  sendMany?(db: Kysely<Database>, works: readonly DueWork[]): Promise<void>;
  /**
   * Drops what a worker whose lease on these rows ended (it died) still holds of their
   * announcements, in `db`'s transaction: on pg-boss, its active messages, which would count in
   * their account's group until pg-boss finds their heartbeat stale.
   */
  dropHeld?(db: Kysely<Database>, kind: WorkKind, ids: string[]): Promise<void>;
  /**
   * Which of these rows already have an announcement waiting to be delivered (announcing them
   * again would change nothing): a worker's start then sends only what is missing, not its backlog.
   */
  waiting?(db: Kysely<Database>, kind: WorkKind, ids: string[]): Promise<Set<string>>;
  /** The rows of `kind` whose announcement a worker is running now (pg-boss: active messages). */
  running?(db: Kysely<Database>, kind: WorkKind): Promise<string[]>;
}

/**
 * Runs `write` so that what it sends through `dispatch` commits with its rows: in the transaction
 * `db` already is, or in one of its own. Without a dispatch, `write` runs as it is.
 */
export async function withDispatch<T>(
  db: Kysely<Database>,
  dispatch: WorkDispatch | undefined,
  write: (db: Kysely<Database>, dispatch: WorkDispatch | undefined) => Promise<T>,
): Promise<T> {
  if (dispatch === undefined || db.isTransaction) return write(db, dispatch);
  return db.transaction().execute((trx) => write(trx, dispatch));
}

/**
 * Gathers what a transaction announces and sends it at once before the commit (`flush`), through
 * the dispatch's `sendMany`: the submissions of one group commit cost one insert per queue.
 */
export class GatheredDispatch implements WorkDispatch {
  private readonly gathered: DueWork[] = [];

  constructor(private readonly dispatch: WorkDispatch) {}

  async send(_db: Kysely<Database>, work: DueWork): Promise<void> {
    this.gathered.push(work);
  }

  dropHeld(db: Kysely<Database>, kind: WorkKind, ids: string[]): Promise<void> {
    return this.dispatch.dropHeld?.(db, kind, ids) ?? Promise.resolve();
  }

  waiting(db: Kysely<Database>, kind: WorkKind, ids: string[]): Promise<Set<string>> {
    return this.dispatch.waiting?.(db, kind, ids) ?? Promise.resolve(new Set());
  }

  running(db: Kysely<Database>, kind: WorkKind): Promise<string[]> {
    return this.dispatch.running?.(db, kind) ?? Promise.resolve([]);
  }

  /** Sends what was gathered, in `db`'s transaction. */
  async flush(db: Kysely<Database>): Promise<void> {
    const works = this.gathered.splice(0);
    if (works.length === 0) return;
    if (this.dispatch.sendMany !== undefined) await this.dispatch.sendMany(db, works);
    else for (const work of works) await this.dispatch.send(db, work);
  }
}
