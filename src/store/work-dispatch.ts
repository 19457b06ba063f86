import type { Kysely, RawBuilder } from 'kysely';
import type { JobStage } from '../domain/records.js';
import type { Database } from './schema.js';

/** The kinds of background work announced as messages: callbacks (jobs are signalled: DueJob). */
export type WorkKind = 'callback';

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

/** A job of `accountId` became due in `kind`'s stage now (a signal, not a message: see JobSignal). */
export interface DueJob {
  kind: JobStage;
  accountId: string;
}

/**
 * Where a store announces work that became due, inside the transaction that made it due, so the
 * announcement commits with the row or not at all. The embedded store has none (its runner reads
 * the due list itself); on PostgreSQL callbacks are pg-boss messages (src/queue), and jobs, which
 * every worker claims from the due list itself, a wake-up signal (NOTIFY) to the other processes.
 */
export interface WorkDispatch {
  send(db: Kysely<Database>, work: DueWork): Promise<void>;
  /**
   * A job became due now, in `db`'s transaction: the processes that run its stage look at the due
   * list once it commits (PostgreSQL: a NOTIFY; other processes would otherwise find it at their
   * next look, up to JobRunner's JOB_LOOK_MS later).
   */
  signal?(db: Kysely<Database>, due: DueJob): Promise<void>;
  /**
   * `signal` for several jobs as a query, for a statement of the store's own to run as one of its
   * CTEs (an acceptance's, which writes everything in one statement): its commit sends them.
   */
  signalQuery?(dues: readonly DueJob[]): RawBuilder<{ signalled: unknown }>;
  /**
   * Which of these rows already have an announcement waiting to be delivered (announcing them
   * again would change nothing): a worker's start then sends only what is missing, not its backlog.
   */
  waiting?(db: Kysely<Database>, kind: WorkKind, ids: string[]): Promise<Set<string>>;
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
