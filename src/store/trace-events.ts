import type { Kysely } from 'kysely';
import type { TraceEvent } from './records.js';
import type { Database } from './schema.js';

export class TraceRepository {
  constructor(private readonly db: Kysely<Database>) {}

  async append(
    fileId: string,
    message: string,
    timestamp = new Date().toISOString(),
  ): Promise<void> {
    await this.appendAll(fileId, [{ timestamp, message }]);
  }

  /** Appends several events in order with one lookup and one insert, in one transaction. */
  async appendAll(fileId: string, events: readonly TraceEvent[]): Promise<void> {
    if (events.length === 0) return;
    if (!this.db.isTransaction) {
      await this.db
        .transaction()
        .execute((trx) => new TraceRepository(trx).appendAll(fileId, events));
      return;
    }
    const last = await this.db
      .selectFrom('trace_events')
      .select((eb) => eb.fn.max('seq').as('seq'))
      .where('file_id', '=', fileId)
      .executeTakeFirst();
    const base = Number(last?.seq ?? 0);
    await this.db
      .insertInto('trace_events')
      .values(
        events.map((event, index) => ({
          file_id: fileId,
          seq: base + index + 1,
          timestamp: event.timestamp,
          message: event.message,
        })),
      )
      .execute();
  }

  async list(fileId: string): Promise<TraceEvent[]> {
    return this.db
      .selectFrom('trace_events')
      .select(['timestamp', 'message'])
      .where('file_id', '=', fileId)
      .orderBy('seq')
      .execute();
  }
}
