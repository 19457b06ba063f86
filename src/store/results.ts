import { type Kysely, PostgresAdapter, sql } from 'kysely';
import type { StoredFile, TraceEvent } from '../domain/records.js';
import type { AccountRepository } from './accounts.js';
import {
  FILE_ROW_ARGUMENTS,
  type FileRepository,
  type FileRowArguments,
  fileRowArguments,
  fileRowValues,
} from './files.js';
import { QueryTemplate } from './query-template.js';
import type { Database } from './schema.js';
import type { TraceRepository } from './trace-events.js';

/** What a finished item writes: its row, its trace, and its charge. */
export interface ResultRows {
  file: StoredFile;
  /** The verdict cache's key of a result scanned now with a complete verdict. */
  verdictKey: string | null;
  /** Added to the account's balance (negative: a charge); 0 writes nothing. */
  credits: number;
  events: readonly TraceEvent[];
}

/** Items with up to this many trace events are written in one statement on PostgreSQL. */
const TEMPLATED_EVENTS = 12;

/**
 * One statement for a whole result on PostgreSQL: the file's insert, its trace's insert and the
 * charge as data-modifying CTEs. Each statement is a round trip to the server, and on this
 * machine a round trip's socket write alone cost ~0.1 ms of the service's CPU: three of them per
 * item were a quarter of its work.
 */
function resultStatement(events: number, charged: boolean): QueryTemplate<unknown[]> {
  const arity = FILE_ROW_ARGUMENTS + 2 * events + (charged ? 1 : 0);
  return new QueryTemplate(arity, (db, ...args: unknown[]) => {
    const row = args.slice(0, FILE_ROW_ARGUMENTS) as unknown as FileRowArguments;
    const trace = args.slice(FILE_ROW_ARGUMENTS, FILE_ROW_ARGUMENTS + 2 * events) as string[];
    const credits = args[FILE_ROW_ARGUMENTS + 2 * events] as number;
    const [fileId, accountId] = row;
    const writes = db
      .with('result_file', (cte) => cte.insertInto('files').values(fileRowValues(row)))
      .with('result_trace', (cte) =>
        cte.insertInto('trace_events').values(
          Array.from({ length: events }, (_, event) => ({
            file_id: fileId,
            timestamp: trace[2 * event] as string,
            message: trace[2 * event + 1] as string,
          })),
        ),
      );
    const statement = charged
      ? writes.with('result_charge', (cte) =>
          cte
            .updateTable('accounts')
            .set((eb) => ({ balance: eb('balance', '+', credits) }))
            .where('id', '=', accountId),
        )
      : writes;
    return (statement as typeof writes).selectNoFrom(sql<number>`1`.as('written'));
  });
}

const resultStatements = new Map<string, QueryTemplate<unknown[]>>();

function resultStatementFor(events: number, charged: boolean): QueryTemplate<unknown[]> {
  const key = `${events}:${charged}`;
  let template = resultStatements.get(key);
  if (template === undefined) {
    template = resultStatement(events, charged);
    resultStatements.set(key, template);
  }
  return template;
}

/** Writes a finished item's rows, in the caller's transaction. */
export class ResultRepository {
  private readonly postgres: boolean;

  constructor(
    private readonly db: Kysely<Database>,
    private readonly files: FileRepository,
    private readonly accounts: AccountRepository,
    private readonly trace: TraceRepository,
  ) {
    this.postgres = db.getExecutor().adapter instanceof PostgresAdapter;
  }

  async record({ file, verdictKey, credits, events }: ResultRows): Promise<void> {
    // SQLite runs in the process: three statements cost no more than one there.
    if (this.postgres && events.length > 0 && events.length <= TEMPLATED_EVENTS) {
      const args: unknown[] = [...fileRowArguments(file, verdictKey)];
      for (const event of events) args.push(event.timestamp, event.message);
      if (credits !== 0) args.push(credits);
      await resultStatementFor(events.length, credits !== 0).execute(this.db, ...args);
      return;
    }
    await this.files.insert(file, verdictKey);
    if (credits !== 0) await this.accounts.addCredits(file.accountId, credits);
    await this.trace.appendAll(file.id, events);
  }
}
