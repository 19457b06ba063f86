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

/**
 * Events written with a result's row (files.trace): a JSON array of [timestamp, message] pairs,
 * one column instead of a row and an index entry per event.
 */
export function inlineTrace(events: readonly TraceEvent[]): string {
  return JSON.stringify(events.map((event) => [event.timestamp, event.message]));
}

function eventsOfInlineTrace(trace: string | null | undefined): TraceEvent[] {
  if (trace === null || trace === undefined) return [];
  return (JSON.parse(trace) as [string, string][]).map(([timestamp, message]) => ({
    timestamp,
    message,
  }));
}

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

  /** The events written with the result (inlineTrace), then its rows in order. */
  async list(fileId: string): Promise<TraceEvent[]> {
    const file = await this.db
      .selectFrom('files')
      .select('trace')
      .where('id', '=', fileId)
      .executeTakeFirst();
    const rows = await this.db
      .selectFrom('trace_events')
      .select(['timestamp', 'message'])
      .where('file_id', '=', fileId)
      .orderBy('seq')
      .execute();
    return [...eventsOfInlineTrace(file?.trace), ...rows];
  }
}
