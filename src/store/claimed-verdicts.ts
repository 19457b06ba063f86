import { sql } from 'kysely';
import type { ClaimedVerdicts, EarlierVerdict } from '../domain/records.js';
import { reusable, type VerdictRow } from './files.js';

/**
 * What a claim looks up with its jobs: complete verdicts received `since` or later. Whose they are
 * is the key's to say (its scope: the account, or every account when the cache is shared).
 */
export interface VerdictsToClaim {
  since: string;
}

/**
 * The most verdicts a claim brings per job. Keys of one content differ by account (unless the
 * cache is shared), categories and engine versions; past this many (content many accounts send),
 * the job's own key is looked up as without the claim.
 */
export const CLAIMED_VERDICTS_MAX = 8;

/** A claimed verdict as the statement gives it (JSON). */
type ClaimedVerdictRow = VerdictRow & { key: string };

/**
 * The `verdicts` column of a claim on PostgreSQL, beside `jobs.*` and `job_contents.content`: for
 * a small upload, its content's earlier verdicts, by the range of keys that begin with the
 * content's SHA-256 (files_verdict_key, one index seek); NULL for other jobs or without `toClaim`.
 * One statement for the claim and the lookup: a round trip each was 0.3-0.5 ms of the service's
 * and PostgreSQL's CPU per item (issue 28). Nothing else narrows the rows: with the account too,
 * PostgreSQL's generic plan took the account's index and hashed the content once per file of
 * the account (5 ms a claim).
 */
export function claimedVerdictsColumn(toClaim: VerdictsToClaim | null | undefined) {
  if (toClaim == null) return sql`NULL::json AS verdicts`;
  return sql`CASE WHEN job_contents.content IS NULL THEN NULL ELSE (
      SELECT coalesce(json_agg(found), '[]'::json) FROM (
        SELECT f.verdict_key AS key, f.id, f.content_type, f.findings, f.creation_date
        FROM files f, (SELECT encode(sha256(job_contents.content), 'hex') AS sha256) content
        WHERE f.verdict_key >= content.sha256 AND f.verdict_key < (content.sha256 || 'g')
          AND f.creation_date >= ${toClaim.since} AND f.findings IS NOT NULL
        LIMIT ${CLAIMED_VERDICTS_MAX + 1}
      ) found
    ) END AS verdicts`;
}

/** A claimed row's `verdicts` as the job carries them; undefined when not looked up. */
export function claimedVerdictsOf(
  rows: readonly ClaimedVerdictRow[] | null | undefined,
): ClaimedVerdicts | undefined {
  if (rows == null) return undefined;
  const verdicts: EarlierVerdict[] = [];
  for (const row of rows.slice(0, CLAIMED_VERDICTS_MAX)) {
    const verdict = reusable(row);
    if (verdict !== null) verdicts.push({ key: row.key, ...verdict });
  }
  return { verdicts, complete: rows.length <= CLAIMED_VERDICTS_MAX };
}

/** What a claim's row carries beside the job's columns. */
export interface ClaimedVerdictsColumn {
  verdicts?: ClaimedVerdictRow[] | null;
}
