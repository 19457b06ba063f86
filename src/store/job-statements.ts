import { type Kysely, sql } from 'kysely';
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

/** A job row's values in `insertJob`'s order (JSON already encoded). */
export type JobRowArguments = readonly [
  id: string,
  accountId: string,
  apiKeyId: string,
  apiVersion: string,
  kind: string,
  state: string,
  location: string | null,
  spoolKey: string | null,
  metadata: string,
  callback: string | null,
  attempts: number,
  runAfter: string,
  creationDate: string,
  legacy: string | null,
  lastError: string | null,
  size: number,
  creditHeld: number,
  stage: string,
  fileName: string | null,
];

// Every accepted item runs these: built once (QueryTemplate), not by Kysely each time.
export const insertJob = new QueryTemplate(19, (db, ...row: JobRowArguments) =>
  db.insertInto('jobs').values({
    id: row[0],
    account_id: row[1],
    api_key_id: row[2],
    api_version: row[3],
    kind: row[4],
    state: row[5],
    location: row[6],
    spool_key: row[7],
    metadata: row[8],
    callback: row[9],
    attempts: row[10],
    run_after: row[11],
    creation_date: row[12],
    legacy: row[13],
    last_error: row[14],
    size: row[15],
    credit_held: row[16],
    stage: row[17],
    file_name: row[18],
  }),
);
export const insertJobContent = new QueryTemplate(2, (db, id: string, content: Buffer) =>
  db.insertInto('job_contents').values({ job_id: id, content }),
);
/** Every async submission reads it (the spool quota): the bytes held in all and by one account. */
export const spooledBytesOf = new QueryTemplate(1, (db, accountId: string) =>
  db
    .selectFrom('jobs')
    .select((eb) => [
      eb.fn.coalesce(eb.fn.sum<number>('size'), eb.lit(0)).as('total'),
      eb.fn
        .coalesce(
          eb.fn.sum<number>(
            eb.case().when('account_id', '=', accountId).then(eb.ref('size')).else(0).end(),
          ),
          eb.lit(0),
        )
        .as('account'),
    ]),
);
export const deleteJob = new QueryTemplate(1, (db, id: string) =>
  db.deleteFrom('jobs').where('id', '=', id),
);

// The due list's statements, run on every claim round: built once (QueryTemplate).
// The content is read apart, and only for a job claimed: in SQLite the left join cost four times
// the two lookups by key (59 against 14 us a row here).
export const jobById = new QueryTemplate(1, (db, id: string) =>
  db.selectFrom('jobs').selectAll().where('id', '=', id),
);
export const contentOfJob = new QueryTemplate(1, (db, id: string) =>
  db.selectFrom('job_contents').select('content').where('job_id', '=', id),
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
/**
 * SQLite: an account's oldest due jobs of a stage, but those named in `running` (a JSON array of
 * ids: jobs running here whose lease ended). Left out by the statement, not after it: reading
 * past them asked for as many more rows as jobs ran here, whole rows at 3.4 µs each, nearly all
 * of them due jobs then thrown away (137 µs a claim in the SQLite async bench).
 */
export const dueOfAccount = new QueryTemplate(
  5,
  (db, stage: string, accountId: string, now: string, running: string, limit: number) =>
    db
      .selectFrom('jobs')
      .selectAll()
      .where('stage', '=', stage)
      .where('account_id', '=', accountId)
      .where('run_after', '<=', now)
      .where('id', 'not in', sql<string>`(select value from json_each(${running}))`)
      .orderBy('run_after')
      .limit(limit),
);
/** Templates of `claimDue`'s update of 1 to this many jobs (a round claims up to its free slots). */
const TEMPLATED_CLAIMS = 16;
/** Claims the jobs named if they may still be claimed by `now`: `claimDue`'s update. */
export const claimDueJobs = Array.from(
  { length: TEMPLATED_CLAIMS },
  (_, i) =>
    new QueryTemplate(2 + i + 1, (db, leaseUntil: string, now: string, ...ids: string[]) =>
      db
        .updateTable('jobs')
        .set((eb) => ({
          state: 'processing',
          attempts: eb('attempts', '+', 1),
          run_after: leaseUntil,
          last_error: null,
        }))
        .where('id', 'in', ids)
        .where('run_after', '<=', now)
        .returning(['id', 'attempts']),
    ),
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
export const inFlightOfAccount = new QueryTemplate(
  3,
  (db, now: string, stage: string, accountId: string) =>
    db
      .selectFrom('jobs')
      .select((eb) => eb.fn.countAll<number>().as('count'))
      .where('state', '=', 'processing')
      .where('run_after', '>', now)
      .where('stage', '=', stage)
      .where('account_id', '=', accountId),
);
export const downloadedPerAccount = new QueryTemplate(0, (db) =>
  db
    .selectFrom('jobs')
    .select((eb) => ['account_id', eb.fn.countAll<number>().as('count')])
    .where('stage', '=', 'scan')
    .where('kind', 'in', ['fetch', 'bucket'])
    .groupBy('account_id'),
);
export const earliestRunAfter = new QueryTemplate(1, (db, stage: string) =>
  db
    .selectFrom('jobs')
    .select((eb) => eb.fn.min('run_after').as('next'))
    .where('stage', '=', stage),
);
