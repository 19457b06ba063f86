import { type Kysely, sql } from 'kysely';
import type { TraceEvent } from './records.js';
import type { Database } from './schema.js';

export class TraceRepository {
  constructor(private readonly db: Kysely<Database>) {}

  /** Appends in order: the sequence number is the next one for that file, in the same statement. */
  async append(
    fileId: string,
    message: string,
    timestamp = new Date().toISOString(),
  ): Promise<void> {
    await sql`insert into trace_events (file_id, seq, timestamp, message)
      select ${fileId}, coalesce(max(seq), 0) + 1, ${timestamp}, ${message}
      from trace_events where file_id = ${fileId}`.execute(this.db);
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
