import { type Kysely, type RawBuilder, sql } from 'kysely';
import { notifyChannelSql } from 'pg-boss/dist/plans.js';
import type { JobStage } from '../domain/records.js';
import type { DueSignals } from '../processing/work-delivery.js';
import type { Database } from '../store/schema.js';
import type { DueJob } from '../store/work-dispatch.js';

/** A due job's signal: a NOTIFY on pg-boss's channel whose payload starts so (then stage, account). */
const JOB_SIGNAL = 'assay-job';

/**
 * The signals of due jobs on PostgreSQL: a NOTIFY sent in the transaction that makes a job due
 * (so it arrives when the row commits, never before), on pg-boss's channel, whose LISTEN
 * connection PgBossDispatch keeps; every process that runs jobs hears it and looks at its due list.
 */
export class JobSignals implements DueSignals {
  private readonly listeners: Array<(stage: JobStage, accountId: string) => void> = [];

  /** @param schema pg-boss's schema, a plain identifier (PgBossDispatch checks it). */
  constructor(private readonly schema: string) {}

  /** `listener` hears of every job signalled due, from any process. */
  onDue(listener: (stage: JobStage, accountId: string) => void): void {
    this.listeners.push(listener);
  }

  /** A NOTIFY on the channel: false when it is not a job's signal (a queue's send). */
  heard(payload: string): boolean {
    const [kind, stage, ...account] = payload.split(':');
    if (kind !== JOB_SIGNAL) return false;
    if (stage !== 'scan' && stage !== 'download') return true;
    for (const listener of this.listeners) listener(stage, account.join(':'));
    return true;
  }

  /** The LISTEN connection was re-established: what was signalled meanwhile is looked for. */
  missed(): void {
    for (const listener of this.listeners) {
      listener('scan', '');
      listener('download', '');
    }
  }

  /** One NOTIFY per job (PostgreSQL sends one of identical ones per transaction), one statement. */
  async send(db: Kysely<Database>, dues: readonly DueJob[]): Promise<void> {
    if (dues.length > 0) await this.query(dues).execute(db);
  }

  /** `send` as a query of its own, for a statement to run in a CTE: its commit sends them. */
  query(dues: readonly DueJob[]): RawBuilder<{ signalled: unknown }> {
    const payloads = dues.map((due) => `${JOB_SIGNAL}:${due.kind}:${due.accountId}`);
    return sql`SELECT pg_notify(${sql.raw(notifyChannelSql(this.schema))}, payload) AS signalled
      FROM unnest(${payloads}::text[]) AS payload`;
  }
}
