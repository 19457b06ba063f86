import { type RawBuilder, sql } from 'kysely';
import type { Job, JobStage } from '../domain/records.js';
import { prepared } from './prepared.js';

/** An item accepted: its job, and its trace's first event. */
export interface Acceptance {
  job: Job;
  received: { timestamp: string; message: string };
}

/** A fetch is downloaded into the spool first; content already there goes to the scan. */
export function stageOf(job: Pick<Job, 'kind' | 'spoolKey'>): JobStage {
  return job.kind !== 'upload' && job.spoolKey === null ? 'download' : 'scan';
}

/**
 * Items accepted together in one statement (PostgreSQL), given as JSON: each account's credits
 * for all its items here, their jobs, contents and first trace events, and `signals` (the due
 * jobs' NOTIFY, sent by the statement's commit). An account that enforces its balance and cannot
 * pay for all its items here has none of them accepted: `n` lists the items accepted (one item
 * alone: accepted, or refused when its account has no credit left).
 */
export function acceptGroup(
  items: readonly Acceptance[],
  signals: RawBuilder<{ signalled: unknown }> | null,
) {
  const rows = items.map(({ job, received }, n) => ({
    n,
    id: job.id,
    account_id: job.accountId,
    api_key_id: job.apiKeyId,
    api_version: job.apiVersion,
    kind: job.kind,
    state: job.state,
    location: job.location,
    spool_key: job.spoolKey,
    metadata: JSON.stringify(job.metadata),
    callback: job.callback,
    attempts: job.attempts,
    run_after: job.runAfter,
    creation_date: job.creationDate,
    legacy: job.legacy ? JSON.stringify(job.legacy) : null,
    last_error: job.lastError ?? null,
    size: job.size ?? 0,
    stage: stageOf(job),
    file_name: job.fileName ?? null,
    // bytea through JSON: its hex form.
    content: job.content == null ? null : job.content.toString('hex'),
    received_at: received.timestamp,
    received: received.message,
  }));
  return sql<{ n: number }>`${prepared}
    WITH input AS (
      SELECT * FROM json_to_recordset(${JSON.stringify(rows)}::json) AS r(
        n int, id text, account_id text, api_key_id text, api_version text, kind text,
        state text, location text, spool_key text, metadata text, callback text, attempts int,
        run_after text, creation_date text, legacy text, last_error text, size bigint,
        stage text, content text, received_at text, received text, file_name text)
    ),
    wanted AS (SELECT account_id, count(*) AS credits FROM input GROUP BY account_id),
    credit AS (
      UPDATE accounts SET balance = accounts.balance - wanted.credits
      FROM wanted
      WHERE accounts.id = wanted.account_id
        AND (accounts.enforce_balance = 0 OR accounts.balance >= wanted.credits)
      RETURNING accounts.id
    ),
    taken AS (SELECT * FROM input WHERE account_id IN (SELECT id FROM credit)),
    job AS (
      INSERT INTO jobs (id, account_id, api_key_id, api_version, kind, state, location,
        spool_key, metadata, callback, attempts, run_after, creation_date, legacy,
        last_error, size, credit_held, stage, file_name)
      SELECT id, account_id, api_key_id, api_version, kind, state, location, spool_key,
        metadata, callback, attempts, run_after, creation_date, legacy, last_error, size, 1,
        stage, file_name
      FROM taken ORDER BY n
    ),
    content AS (
      INSERT INTO job_contents (job_id, content)
      SELECT id, decode(content, 'hex') FROM taken WHERE content IS NOT NULL
    ),
    received AS (
      INSERT INTO trace_events (file_id, timestamp, message)
      SELECT id, received_at, received FROM taken ORDER BY n
    )${
      signals === null
        ? sql``
        : sql`,
    signal AS (${signals})`
    }
    SELECT n${signals === null ? sql`` : sql`, (SELECT count(*) FROM signal) AS signals`}
    FROM taken`;
}
