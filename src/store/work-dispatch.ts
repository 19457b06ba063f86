import type { Kysely } from 'kysely';
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
  /** `signal` for several jobs at once (one statement). */
  signalMany?(db: Kysely<Database>, dues: readonly DueJob[]): Promise<void>;
  /** `send` for several rows at once, in `db`'s transaction (fewer statements). */
  sendMany?(db: Kysely<Database>, works: readonly DueWork[]): Promise<void>;
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

/**
 * Gathers what a transaction announces and sends it at once before the commit (`flush`), through
 * the dispatch's `sendMany`: the submissions of one group commit cost one insert per queue.
 */
export class GatheredDispatch implements WorkDispatch {
  private readonly gathered: DueWork[] = [];
  /** Signals gathered, one per stage and account. */
  private readonly signals = new Map<string, DueJob>();

  constructor(private readonly dispatch: WorkDispatch) {}

  async send(_db: Kysely<Database>, work: DueWork): Promise<void> {
    this.gathered.push(work);
  }

  async signal(_db: Kysely<Database>, due: DueJob): Promise<void> {
    this.signals.set(`${due.kind}\0${due.accountId}`, due);
  }

  waiting(db: Kysely<Database>, kind: WorkKind, ids: string[]): Promise<Set<string>> {
    return this.dispatch.waiting?.(db, kind, ids) ?? Promise.resolve(new Set());
  }

  /** Sends what was gathered, in `db`'s transaction. */
  async flush(db: Kysely<Database>): Promise<void> {
    const works = this.gathered.splice(0);
    const dues = [...this.signals.values()];
    this.signals.clear();
    if (dues.length > 0) {
      if (this.dispatch.signalMany !== undefined) await this.dispatch.signalMany(db, dues);
      else for (const due of dues) await this.dispatch.signal?.(db, due);
    }
    if (works.length === 0) return;
    if (this.dispatch.sendMany !== undefined) await this.dispatch.sendMany(db, works);
    else for (const work of works) await this.dispatch.send(db, work);
  }
}
