import type { Selectable } from 'kysely';
import type { Job, JobKind, JobStage, LegacyJobOptions } from '../domain/records.js';
import type { JobsTable } from './schema.js';

/** A job's row with its content, if the store keeps it (job_contents). */
export type JobRow = Selectable<JobsTable> & { content: Buffer | null };

export function toJob(row: JobRow): Job {
  return {
    id: row.id,
    accountId: row.account_id,
    apiKeyId: row.api_key_id,
    apiVersion: row.api_version,
    kind: row.kind as JobKind,
    state: row.state as Job['state'],
    location: row.location,
    spoolKey: row.spool_key,
    content: row.content,
    metadata: JSON.parse(row.metadata) as Record<string, string>,
    callback: row.callback,
    attempts: row.attempts,
    runAfter: row.run_after,
    creationDate: row.creation_date,
    legacy: row.legacy === null ? null : (JSON.parse(row.legacy) as LegacyJobOptions),
    lastError: row.last_error,
    size: Number(row.size),
    creditHeld: row.credit_held === 1,
    stage: row.stage as JobStage,
    fileName: row.file_name,
  };
}
