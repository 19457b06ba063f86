import type { Kysely } from 'kysely';
import type { TraceEvent } from '../domain/records.js';
import { QueryTemplate } from './query-template.js';
import type { Database } from './schema.js';

/** Templates of an insert of 1 to this many events (an item's trace is usually 3 to 6). */
const TEMPLATED_EVENTS = 12;

const insertEvents = Array.from(
  { length: TEMPLATED_EVENTS },
  (_, i) =>
    new QueryTemplate(1 + 2 * (i + 1), (db, fileId: string, ...timesAndMessages: string[]) =>
      db.insertInto('trace_events').values(
        Array.from({ length: i + 1 }, (__, event) => ({
          file_id: fileId,
          timestamp: timesAndMessages[2 * event] as string,
          message: timesAndMessages[2 * event + 1] as string,
        })),
      ),
    ),
);

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
    const template = insertEvents[events.length - 1];
    if (template !== undefined) {
      const timesAndMessages = events.flatMap((event) => [event.timestamp, event.message]);
      await template.execute(this.db, fileId, ...timesAndMessages);
      return;
    }
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
