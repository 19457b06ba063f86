import { type ExpressionBuilder, type Kysely, type Selectable, sql } from 'kysely';
import type { CallbackDelivery } from '../domain/records.js';
import type { CallbackDeliveriesTable, Database } from './schema.js';
import { type WorkDispatch, withDispatch } from './work-dispatch.js';

/** Deliveries looked up at once for an announcement already waiting (redispatch at start). */
const REDISPATCH_PAGE = 500;

/** A delivery as a list shows it: everything but its body. */
export type DeliverySummary = Omit<CallbackDelivery, 'body'>;

export type DeliveryState = CallbackDelivery['state'];

function toSummary(row: Omit<Selectable<CallbackDeliveriesTable>, 'body'>): DeliverySummary {
  return {
    id: row.id,
    fileId: row.file_id,
    accountId: row.account_id,
    url: row.url,
    destination: row.destination,
    method: row.method === 'GET' ? 'GET' : 'POST',
    contentType: row.content_type,
    state: row.state as DeliveryState,
    attempts: row.attempts,
    nextAttemptAt: row.next_attempt_at,
    lastError: row.last_error,
    creationDate: row.creation_date,
    finishedDate: row.finished_date,
  };
}

function toDelivery(row: Selectable<CallbackDeliveriesTable>): CallbackDelivery {
  return { ...toSummary(row), body: row.body };
}

/** Deliveries an attempt may not start for now: of these accounts, or of these lanes. */
export interface DeliverySkip {
  accounts: readonly string[];
  lanes: ReadonlyArray<{ accountId: string; destination: string }>;
}

const NOTHING_SKIPPED: DeliverySkip = { accounts: [], lanes: [] };

/**
 * Pending deliveries outside `skip`. Lanes are left out by one list of `account destination`
 * keys (the gate's `laneKey`), not a condition per lane: SQLite limits an expression's depth.
 */
function notSkipped(eb: ExpressionBuilder<Database, 'callback_deliveries'>, skip: DeliverySkip) {
  const conditions = [eb('state', '=', 'pending')];
  if (skip.accounts.length > 0) conditions.push(eb('account_id', 'not in', skip.accounts));
  if (skip.lanes.length > 0) {
    const keys = skip.lanes.map((lane) => `${lane.accountId} ${lane.destination}`);
    conditions.push(eb(sql<string>`account_id || ' ' || destination`, 'not in', keys));
  }
  return eb.and(conditions);
}

/** Durable callback deliveries: written with the result, removed from the due list when settled. */
export class CallbackOutbox {
  /** `dispatch`: told of every delivery that becomes due, in the same transaction (PostgreSQL). */
  constructor(
    private readonly db: Kysely<Database>,
    private readonly dispatch?: WorkDispatch,
  ) {}

  async enqueue(delivery: CallbackDelivery): Promise<void> {
    await withDispatch(this.db, this.dispatch, async (db, dispatch) => {
      await this.insertRow(db, delivery);
      await dispatch?.send(db, {
        kind: 'callback',
        id: delivery.id,
        accountId: delivery.accountId,
        at: delivery.nextAttemptAt,
      });
    });
  }

  /** The delivery as it is now; null when there is none. */
  async find(id: string): Promise<CallbackDelivery | null> {
    const row = await this.db
      .selectFrom('callback_deliveries')
      .selectAll()
      .where('id', '=', id)
      .executeTakeFirst();
    return row === undefined ? null : toDelivery(row);
  }

  /**
   * Announces pending deliveries again (through the dispatch), each due at `at` or else its next
   * attempt: one (`id`), or all of them at start (rows written without a dispatch). A delivery
   * already announced and waiting is not announced twice. `rank` above 0 lets the account's other
   * due deliveries go first (one held back for a full lane yields to a fresh one).
   */
  async redispatch(
    which: { all: true } | { id: string; at?: string; rank?: number },
  ): Promise<number> {
    const dispatch = this.dispatch;
    if (dispatch === undefined) return 0;
    let query = this.db
      .selectFrom('callback_deliveries')
      .select(['id', 'account_id', 'next_attempt_at'])
      .where('state', '=', 'pending');
    if ('id' in which) query = query.where('id', '=', which.id);
    let rows = await query.orderBy('next_attempt_at').execute();
    if (!('id' in which)) {
      // At start: what is waiting already is not sent again (the whole backlog, at every start).
      const missing: typeof rows = [];
      for (let from = 0; from < rows.length; from += REDISPATCH_PAGE) {
        const page = rows.slice(from, from + REDISPATCH_PAGE);
        const waiting =
          (await dispatch.waiting?.(
            this.db,
            'callback',
            page.map((row) => row.id),
          )) ?? new Set<string>();
        missing.push(...page.filter((row) => !waiting.has(row.id)));
      }
      rows = missing;
    }
    for (const row of rows) {
      const at = 'id' in which && which.at !== undefined ? which.at : row.next_attempt_at;
      const rank = 'id' in which ? which.rank : undefined;
      await withDispatch(this.db, dispatch, (db) =>
        dispatch.send(db, {
          kind: 'callback',
          id: row.id,
          accountId: row.account_id,
          at,
          ...(rank === undefined ? {} : { rank }),
        }),
      );
    }
    return rows.length;
  }

  private async insertRow(db: Kysely<Database>, delivery: CallbackDelivery): Promise<void> {
    await db
      .insertInto('callback_deliveries')
      .values({
        id: delivery.id,
        file_id: delivery.fileId,
        account_id: delivery.accountId,
        url: delivery.url,
        destination: delivery.destination,
        method: delivery.method,
        body: delivery.body,
        content_type: delivery.contentType,
        state: delivery.state,
        attempts: delivery.attempts,
        next_attempt_at: delivery.nextAttemptAt,
        last_error: delivery.lastError,
        creation_date: delivery.creationDate,
        finished_date: delivery.finishedDate,
      })
      .execute();
  }

  /** Pending deliveries due by `now`, oldest first, except those `skip` names. */
  async due(
    now: string,
    limit: number,
    skip: DeliverySkip = NOTHING_SKIPPED,
  ): Promise<CallbackDelivery[]> {
    const rows = await this.db
      .selectFrom('callback_deliveries')
      .selectAll()
      .where((eb) => notSkipped(eb, skip))
      .where('next_attempt_at', '<=', now)
      .orderBy('next_attempt_at')
      .limit(limit)
      .execute();
    return rows.map(toDelivery);
  }

  /** Deliveries not delivered or given up yet (an index range of `callback_deliveries_due`). */
  async pendingCount(): Promise<number> {
    const row = await this.db
      .selectFrom('callback_deliveries')
      .select((eb) => eb.fn.countAll<number>().as('count'))
      .where('state', '=', 'pending')
      .executeTakeFirst();
    return Number(row?.count ?? 0);
  }

  /** When the next delivery falls due, except those `skip` names; null: none pending. */
  async nextDue(skip: DeliverySkip = NOTHING_SKIPPED): Promise<string | null> {
    const row = await this.db
      .selectFrom('callback_deliveries')
      .select((eb) => eb.fn.min('next_attempt_at').as('next'))
      .where((eb) => notSkipped(eb, skip))
      .executeTakeFirst();
    return row?.next ?? null;
  }

  /**
   * Holds back an account's pending deliveries to a destination until `until` without counting
   * an attempt: a receiver failing for the account is tried again as a whole, not once per delivery.
   */
  async deferDestination(accountId: string, destination: string, until: string): Promise<void> {
    await this.db
      .updateTable('callback_deliveries')
      .set({ next_attempt_at: until })
      .where('account_id', '=', accountId)
      .where('destination', '=', destination)
      .where('state', '=', 'pending')
      .where('next_attempt_at', '<', until)
      .execute();
  }

  /**
   * Gives up an account's pending deliveries to a destination created before `createdBefore` (too
   * old to wait for it any longer); returns them, for their traces.
   */
  async expireDestination(
    accountId: string,
    destination: string,
    createdBefore: string,
    outcome: { at: string; error: string },
  ): Promise<Array<Pick<CallbackDelivery, 'id' | 'fileId' | 'lastError'>>> {
    if (!this.db.isTransaction) {
      return this.db
        .transaction()
        .execute((trx) =>
          new CallbackOutbox(trx, this.dispatch).expireDestination(
            accountId,
            destination,
            createdBefore,
            outcome,
          ),
        );
    }
    const expired = await this.db
      .selectFrom('callback_deliveries')
      .select(['id', 'file_id', 'last_error'])
      .where('account_id', '=', accountId)
      .where('destination', '=', destination)
      .where('state', '=', 'pending')
      .where('creation_date', '<', createdBefore)
      .execute();
    if (expired.length === 0) return [];
    await this.db
      .updateTable('callback_deliveries')
      .set({ state: 'failed', finished_date: outcome.at, last_error: outcome.error })
      .where('account_id', '=', accountId)
      .where('destination', '=', destination)
      .where('state', '=', 'pending')
      .where('creation_date', '<', createdBefore)
      .execute();
    return expired.map((row) => ({ id: row.id, fileId: row.file_id, lastError: row.last_error }));
  }

  /**
   * Takes a due delivery for one attempt by moving its next attempt to `leaseUntil`: should the
   * process die mid-attempt, the delivery is simply due again then (at least once, never lost).
   */
  async claim(delivery: CallbackDelivery, leaseUntil: string): Promise<boolean> {
    const result = await this.db
      .updateTable('callback_deliveries')
      .set({ next_attempt_at: leaseUntil, attempts: delivery.attempts + 1 })
      .where('id', '=', delivery.id)
      .where('state', '=', 'pending')
      .where('next_attempt_at', '=', delivery.nextAttemptAt)
      .executeTakeFirst();
    return result.numUpdatedRows > 0n;
  }

  async settle(
    id: string,
    outcome:
      | { state: 'delivered' | 'failed'; at: string; error: string | null }
      | { state: 'pending'; nextAttemptAt: string; error: string },
  ): Promise<void> {
    await withDispatch(this.db, this.dispatch, async (db, dispatch) => {
      const row = await db
        .updateTable('callback_deliveries')
        .set(
          outcome.state === 'pending'
            ? { next_attempt_at: outcome.nextAttemptAt, last_error: outcome.error }
            : { state: outcome.state, finished_date: outcome.at, last_error: outcome.error },
        )
        .where('id', '=', id)
        .returning('account_id')
        .executeTakeFirst();
      if (row !== undefined && outcome.state === 'pending') {
        const work = { kind: 'callback', id, accountId: row.account_id } as const;
        await dispatch?.send(db, { ...work, at: outcome.nextAttemptAt });
      }
    });
  }

  /**
   * One page of an account's deliveries in one state, newest first ((creation_date, id)
   * descending), after `before`: one range of the (account, state, creation_date, id) index.
   */
  async listForAccount(
    accountId: string,
    state: DeliveryState,
    before: { creationDate: string; id: string } | null,
    limit: number,
  ): Promise<DeliverySummary[]> {
    let select = this.db
      .selectFrom('callback_deliveries')
      .select([
        'id',
        'file_id',
        'account_id',
        'url',
        'destination',
        'method',
        'content_type',
        'state',
        'attempts',
        'next_attempt_at',
        'last_error',
        'creation_date',
        'finished_date',
      ])
      .where('account_id', '=', accountId)
      .where('state', '=', state);
    if (before !== null) {
      select = select.where((eb) =>
        eb(eb.refTuple('creation_date', 'id'), '<', eb.tuple(before.creationDate, before.id)),
      );
    }
    const rows = await select
      .orderBy('creation_date', 'desc')
      .orderBy('id', 'desc')
      .limit(limit)
      .execute();
    return rows.map(toSummary);
  }

  /**
   * Makes an account's failed or pending delivery due at `at`, given up or not: a failed one is
   * pending again, its attempts kept (so it is given up again after one failed attempt once it is
   * older than the maximum age). A waiting announcement is moved to `at`. Null when the account
   * has no such delivery in either state.
   */
  async makeDue(
    accountId: string,
    id: string,
    at: string,
  ): Promise<Pick<CallbackDelivery, 'fileId' | 'destination'> | null> {
    return withDispatch(this.db, this.dispatch, async (db, dispatch) => {
      const row = await db
        .updateTable('callback_deliveries')
        .set({ state: 'pending', next_attempt_at: at, finished_date: null })
        .where('id', '=', id)
        .where('account_id', '=', accountId)
        .where('state', 'in', ['pending', 'failed'])
        .returning(['file_id', 'destination'])
        .executeTakeFirst();
      if (row === undefined) return null;
      await dispatch?.send(db, { kind: 'callback', id, accountId, at, sooner: true });
      return { fileId: row.file_id, destination: row.destination };
    });
  }

  /** An account's delivery; null when there is none (another account's included). */
  async findForAccount(accountId: string, id: string): Promise<CallbackDelivery | null> {
    const row = await this.db
      .selectFrom('callback_deliveries')
      .selectAll()
      .where('id', '=', id)
      .where('account_id', '=', accountId)
      .executeTakeFirst();
    return row === undefined ? null : toDelivery(row);
  }

  async listForFile(fileId: string): Promise<CallbackDelivery[]> {
    const rows = await this.db
      .selectFrom('callback_deliveries')
      .selectAll()
      .where('file_id', '=', fileId)
      .orderBy('creation_date')
      .execute();
    return rows.map(toDelivery);
  }
}
