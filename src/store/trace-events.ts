import type { Kysely } from 'kysely';
import type { TraceEvent } from '../domain/records.js';
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

  /** Appends several events in order, in one insert: `seq` is assigned by the database. */
  async appendAll(fileId: string, events: readonly TraceEvent[]): Promise<void> {
    if (events.length === 0) return;
    await this.db
      .insertInto('trace_events')
      .values(
        events.map((event) => ({
          file_id: fileId,
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
