import type { Kysely, Selectable } from 'kysely';
import type { BucketObjectsTable, Database } from './schema.js';

/** An object of a watched bucket as the store knows it. */
export interface BucketObject {
  sourceId: string;
  key: string;
  etag: string | null;
  versionId: string | null;
  size: number | null;
  /** Its scan in flight (the job's id is its result's); null: none. */
  jobId: string | null;
  resultId: string | null;
  /** The status written back (ScanStatus); null before the first verdict. */
  status: string | null;
  /** The signature set of its latest scan (ServiceTag's digest): rescans compare it. */
  signatures: string | null;
  scannedAt: string | null;
  /** When its write-back is due (epoch ms); null: nothing to write. */
  writeDue: number | null;
  writeAttempts: number;
  announcedAt: string;
}

function toObject(row: Selectable<BucketObjectsTable>): BucketObject {
  return {
    sourceId: row.source_id,
    key: row.object_key,
    etag: row.etag,
    versionId: row.version_id,
    size: row.size === null ? null : Number(row.size),
    jobId: row.job_id,
    resultId: row.result_id,
    status: row.status,
    signatures: row.signatures,
    scannedAt: row.scanned_at,
    writeDue: row.write_due === null ? null : Number(row.write_due),
    writeAttempts: row.write_attempts,
    announcedAt: row.announced_at,
  };
}

/** A scan that ended: the object's row and its job's result. */
export interface FinishedScan {
  object: BucketObject;
  findings: string[] | null;
  error: string | null;
  creationDate: string;
}

/**
 * What is known of each watched object: the scan in flight, the latest verdict and the write-back
 * still due. The row is written before its job is submitted, so a scan is never without its row;
 * a row whose job never came (the process died between the two) is found by `orphans`.
 */
export class BucketObjectRepository {
  constructor(private readonly db: Kysely<Database>) {}

  async find(sourceId: string, key: string): Promise<BucketObject | null> {
    const row = await this.db
      .selectFrom('bucket_objects')
      .selectAll()
      .where('source_id', '=', sourceId)
      .where('object_key', '=', key)
      .executeTakeFirst();
    return row === undefined ? null : toObject(row);
  }

  /** The object's row with a new scan in flight (inserted, or updated keeping its last verdict). */
  async startScan(
    object: Pick<BucketObject, 'sourceId' | 'key' | 'etag' | 'versionId' | 'size' | 'signatures'>,
    jobId: string,
    now: string,
  ): Promise<void> {
    const values = {
      etag: object.etag,
      version_id: object.versionId,
      size: object.size,
      job_id: jobId,
      signatures: object.signatures,
      announced_at: now,
    };
    await this.db
      .insertInto('bucket_objects')
      .values({ source_id: object.sourceId, object_key: object.key, ...values })
      .onConflict((conflict) => conflict.columns(['source_id', 'object_key']).doUpdateSet(values))
      .execute();
  }

  /** Scans of `sourceId` (or of every source) in flight: what a listing or a rescan waits on. */
  async inFlight(sourceId?: string): Promise<number> {
    let query = this.db
      .selectFrom('bucket_objects')
      .select((eb) => eb.fn.countAll<number | string>().as('count'))
      .where('job_id', 'is not', null);
    if (sourceId !== undefined) query = query.where('source_id', '=', sourceId);
    const row = await query.executeTakeFirstOrThrow();
    return Number(row.count);
  }

  /** Verdicts of `sourceId` still to be written back. */
  async writesDue(sourceId: string): Promise<number> {
    const row = await this.db
      .selectFrom('bucket_objects')
      .select((eb) => eb.fn.countAll<number | string>().as('count'))
      .where('source_id', '=', sourceId)
      .where('write_due', 'is not', null)
      .executeTakeFirstOrThrow();
    return Number(row.count);
  }

  /** Scans whose job has recorded its result, oldest first. */
  async finishedScans(limit: number): Promise<FinishedScan[]> {
    const rows = await this.db
      .selectFrom('bucket_objects')
      .innerJoin('files', 'files.id', 'bucket_objects.job_id')
      .selectAll('bucket_objects')
      .select(['files.findings', 'files.error', 'files.creation_date as file_date'])
      .orderBy('files.creation_date')
      .limit(limit)
      .execute();
    return rows.map((row) => ({
      object: toObject(row),
      findings: row.findings === null ? null : (JSON.parse(row.findings) as string[]),
      error: row.error,
      creationDate: row.file_date,
    }));
  }

  /** The verdict of the scan `jobId` (if still the object's scan in flight), its write-back due now. */
  async recordVerdict(
    object: Pick<BucketObject, 'sourceId' | 'key'>,
    jobId: string,
    verdict: { status: string; scannedAt: string },
    nowMs: number,
  ): Promise<boolean> {
    const result = await this.db
      .updateTable('bucket_objects')
      .set({
        job_id: null,
        result_id: jobId,
        status: verdict.status,
        scanned_at: verdict.scannedAt,
        write_due: nowMs,
        write_attempts: 0,
      })
      .where('source_id', '=', object.sourceId)
      .where('object_key', '=', object.key)
      .where('job_id', '=', jobId)
      .executeTakeFirst();
    return Number(result.numUpdatedRows) > 0;
  }

  /**
   * Write-backs due, each taken for `leaseMs` (its due time moved on: another process passes it by,
   * and a process that dies mid-write leaves it due again when the lease ends).
   */
  async takeDueWrites(nowMs: number, leaseMs: number, limit: number): Promise<BucketObject[]> {
    const due = await this.db
      .selectFrom('bucket_objects')
      .selectAll()
      .where('write_due', '<=', nowMs)
      .orderBy('write_due')
      .limit(limit)
      .execute();
    const taken: BucketObject[] = [];
    for (const row of due) {
      const result = await this.db
        .updateTable('bucket_objects')
        .set({ write_due: nowMs + leaseMs })
        .where('source_id', '=', row.source_id)
        .where('object_key', '=', row.object_key)
        .where('write_due', '=', row.write_due)
        .executeTakeFirst();
      if (Number(result.numUpdatedRows) > 0) taken.push(toObject(row));
    }
    return taken;
  }

  /** The write-back was done (or is no longer needed). */
  async written(object: Pick<BucketObject, 'sourceId' | 'key'>): Promise<void> {
    await this.db
      .updateTable('bucket_objects')
      .set({ write_due: null, write_attempts: 0 })
      .where('source_id', '=', object.sourceId)
      .where('object_key', '=', object.key)
      .execute();
  }

  /** The write-back failed: due again at `retryAtMs`. */
  async writeFailed(
    object: Pick<BucketObject, 'sourceId' | 'key'>,
    retryAtMs: number,
  ): Promise<void> {
    await this.db
      .updateTable('bucket_objects')
      .set((eb) => ({ write_due: retryAtMs, write_attempts: eb('write_attempts', '+', 1) }))
      .where('source_id', '=', object.sourceId)
      .where('object_key', '=', object.key)
      .execute();
  }

  /**
   * Rows with a scan in flight whose job is neither queued nor recorded, announced before
   * `before`: the process died between the row and its job, or the job was erased.
   */
  async orphans(before: string, limit: number): Promise<BucketObject[]> {
    const rows = await this.db
      .selectFrom('bucket_objects')
      .selectAll()
      .where('job_id', 'is not', null)
      .where('announced_at', '<', before)
      .where(({ not, exists, selectFrom, ref }) =>
        not(
          exists(
            selectFrom('jobs')
              .select('jobs.id')
              .whereRef('jobs.id', '=', ref('bucket_objects.job_id')),
          ),
        ),
      )
      .where(({ not, exists, selectFrom, ref }) =>
        not(
          exists(
            selectFrom('files')
              .select('files.id')
              .whereRef('files.id', '=', ref('bucket_objects.job_id')),
          ),
        ),
      )
      .limit(limit)
      .execute();
    return rows.map(toObject);
  }

  /** Forgets a scan in flight that will never end (an orphan), so the object can be announced again. */
  async dropScan(object: Pick<BucketObject, 'sourceId' | 'key'>, jobId: string): Promise<void> {
    await this.db
      .updateTable('bucket_objects')
      .set({ job_id: null })
      .where('source_id', '=', object.sourceId)
      .where('object_key', '=', object.key)
      .where('job_id', '=', jobId)
      .execute();
  }

  /**
   * Clean objects of a source scanned at or after `since` with a signature set other than
   * `signatures`, and no scan in flight: what a change of signatures scans again, oldest first.
   */
  async rescanCandidates(
    sourceId: string,
    signatures: string,
    since: string,
    limit: number,
  ): Promise<BucketObject[]> {
    const rows = await this.db
      .selectFrom('bucket_objects')
      .selectAll()
      .where('source_id', '=', sourceId)
      .where('status', '=', 'NO_THREATS_FOUND')
      .where('scanned_at', '>=', since)
      .where('job_id', 'is', null)
      .where((eb) => eb.or([eb('signatures', 'is', null), eb('signatures', '!=', signatures)]))
      .orderBy('scanned_at')
      .limit(limit)
      .execute();
    return rows.map(toObject);
  }

  /** How many objects `rescanCandidates` would give without a limit: how long a rescan takes. */
  async rescansDue(sourceId: string, signatures: string, since: string): Promise<number> {
    const row = await this.db
      .selectFrom('bucket_objects')
      .select((eb) => eb.fn.countAll<number | string>().as('count'))
      .where('source_id', '=', sourceId)
      .where('status', '=', 'NO_THREATS_FOUND')
      .where('scanned_at', '>=', since)
      .where('job_id', 'is', null)
      .where((eb) => eb.or([eb('signatures', 'is', null), eb('signatures', '!=', signatures)]))
      .executeTakeFirstOrThrow();
    return Number(row.count);
  }

  /** Objects of a source by status ('scanning' for those in flight), for the CLI and the console. */
  async countsByStatus(sourceId: string): Promise<Record<string, number>> {
    const rows = await this.db
      .selectFrom('bucket_objects')
      .select((eb) => [
        eb
          .case()
          .when('job_id', 'is not', null)
          .then('scanning')
          .else(eb.fn.coalesce('status', eb.val('unscanned')))
          .end()
          .as('state'),
        eb.fn.countAll<number | string>().as('count'),
      ])
      .where('source_id', '=', sourceId)
      .groupBy('state')
      .execute();
    return Object.fromEntries(rows.map((row) => [String(row.state), Number(row.count)]));
  }
}
