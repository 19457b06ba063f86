import type { Kysely, Selectable } from 'kysely';
import type { CallbackDelivery } from './records.js';
import type { CallbackDeliveriesTable, Database } from './schema.js';

function toDelivery(row: Selectable<CallbackDeliveriesTable>): CallbackDelivery {
  return {
    id: row.id,
    fileId: row.file_id,
    accountId: row.account_id,
    url: row.url,
    method: row.method === 'GET' ? 'GET' : 'POST',
    body: row.body,
    contentType: row.content_type,
    state: row.state as CallbackDelivery['state'],
    attempts: row.attempts,
    nextAttemptAt: row.next_attempt_at,
    lastError: row.last_error,
    creationDate: row.creation_date,
    finishedDate: row.finished_date,
  };
}

/** Durable callback deliveries: written with the result, removed from the due list when settled. */
export class CallbackOutbox {
  constructor(private readonly db: Kysely<Database>) {}

  async enqueue(delivery: CallbackDelivery): Promise<void> {
    await this.db
      .insertInto('callback_deliveries')
      .values({
        id: delivery.id,
        file_id: delivery.fileId,
        account_id: delivery.accountId,
        url: delivery.url,
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

  async due(now: string, limit: number): Promise<CallbackDelivery[]> {
    const rows = await this.db
      .selectFrom('callback_deliveries')
      .selectAll()
      .where('state', '=', 'pending')
      .where('next_attempt_at', '<=', now)
      .orderBy('next_attempt_at')
      .limit(limit)
      .execute();
    return rows.map(toDelivery);
  }

  async nextDue(): Promise<string | null> {
    const row = await this.db
      .selectFrom('callback_deliveries')
      .select((eb) => eb.fn.min('next_attempt_at').as('next'))
      .where('state', '=', 'pending')
      .executeTakeFirst();
    return row?.next ?? null;
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
    await this.db
      .updateTable('callback_deliveries')
      .set(
        outcome.state === 'pending'
          ? { next_attempt_at: outcome.nextAttemptAt, last_error: outcome.error }
          : { state: outcome.state, finished_date: outcome.at, last_error: outcome.error },
      )
      .where('id', '=', id)
      .execute();
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
