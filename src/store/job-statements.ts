import type { Kysely } from 'kysely';
import { QueryTemplate } from './query-template.js';
import type { Database } from './schema.js';

/** Whole job rows, with the content of a small upload kept in the store (null for the others). */
export function withContent(db: Kysely<Database>) {
  return db
    .selectFrom('jobs')
    .leftJoin('job_contents', 'job_contents.job_id', 'jobs.id')
    .selectAll('jobs')
    .select('job_contents.content');
}

// The due list's statements, run on every claim round: built once (QueryTemplate).
export const jobById = new QueryTemplate(1, (db, id: string) =>
  withContent(db).where('jobs.id', '=', id),
);
export const claimUnchanged = new QueryTemplate(
  5,
  (db, attempts: number, leaseUntil: string, id: string, was: number, runAfter: string) =>
    db
      .updateTable('jobs')
      .set({ state: 'processing', attempts, run_after: leaseUntil, last_error: null })
      .where('id', '=', id)
      .where('attempts', '=', was)
      .where('run_after', '=', runAfter),
);
export const dueOfAccount = new QueryTemplate(
  4,
  (db, stage: string, accountId: string, now: string, limit: number) =>
    withContent(db)
      .where('jobs.stage', '=', stage)
      .where('jobs.account_id', '=', accountId)
      .where('jobs.run_after', '<=', now)
      .orderBy('jobs.run_after')
      .limit(limit),
);
export const nextDueAfterAccount = new QueryTemplate(
  3,
  (db, stage: string, afterAccount: string, now: string) =>
    db
      .selectFrom('jobs')
      .select(['id', 'account_id'])
      .where('stage', '=', stage)
      .where('account_id', '>', afterAccount)
      .where('run_after', '<=', now)
      .orderBy('account_id')
      .orderBy('run_after')
      .limit(1),
);
export const inFlightPerAccount = new QueryTemplate(2, (db, now: string, stage: string) =>
  db
    .selectFrom('jobs')
    .select((eb) => ['account_id', eb.fn.countAll<number>().as('count')])
    .where('state', '=', 'processing')
    .where('run_after', '>', now)
    .where('stage', '=', stage)
    .groupBy('account_id'),
);
export const downloadedPerAccount = new QueryTemplate(0, (db) =>
  db
    .selectFrom('jobs')
    .select((eb) => ['account_id', eb.fn.countAll<number>().as('count')])
    .where('stage', '=', 'scan')
    .where('kind', '=', 'fetch')
    .groupBy('account_id'),
);
export const earliestRunAfter = new QueryTemplate(1, (db, stage: string) =>
  db
    .selectFrom('jobs')
    .select((eb) => eb.fn.min('run_after').as('next'))
    .where('stage', '=', stage),
);
