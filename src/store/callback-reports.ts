import type { Kysely } from 'kysely';
import type { CallbackFailure } from '../domain/operations.js';
import type { Database } from './schema.js';

/** What operators see of callbacks across every account (the operations report): read only. */
export class CallbackReports {
  constructor(private readonly db: Kysely<Database>) {}

  /** Deliveries waiting for an attempt, of every account, and when the longest-waiting was due. */
  async pendingSummary(): Promise<{ count: number; oldestDue: string | null }> {
    const row = await this.db
      .selectFrom('callback_deliveries')
      .select((eb) => [
        eb.fn.countAll<number>().as('count'),
        eb.fn.min('next_attempt_at').as('oldest'),
      ])
      .where('state', '=', 'pending')
      .executeTakeFirst();
    return { count: Number(row?.count ?? 0), oldestDue: row?.oldest ?? null };
  }

  /**
   * The newest deliveries of every account whose last attempt failed (retrying or given up): a
   * seek on a partial index.
   */
  async recentFailures(limit: number): Promise<CallbackFailure[]> {
    const rows = await this.db
      .selectFrom('callback_deliveries')
      .select([
        'id',
        'file_id',
        'account_id',
        'destination',
        'state',
        'attempts',
        'last_error',
        'creation_date',
        'next_attempt_at',
      ])
      .where('last_error', 'is not', null)
      .orderBy('creation_date', 'desc')
      .limit(limit)
      .execute();
    return rows.map((row) => ({
      id: row.id,
      fileId: row.file_id,
      accountId: row.account_id,
      destination: row.destination,
      state: row.state,
      attempts: Number(row.attempts),
      lastError: row.last_error ?? '',
      creationDate: row.creation_date,
      nextAttemptAt: row.next_attempt_at,
    }));
  }
}
