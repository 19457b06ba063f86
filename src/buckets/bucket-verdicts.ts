import type { Logger } from 'pino';
import type { BucketSource } from '../domain/records.js';
import { PeriodicTask } from '../periodic-task.js';
import type { BucketObject } from '../store/bucket-objects.js';
import type { Store } from '../store/store.js';
import { BucketRequestError, type ObjectVersion } from './bucket-client.js';
import type { BucketClients } from './bucket-clients.js';
import type { BucketIntake } from './bucket-intake.js';
import { statusOfResult } from './object-status.js';
import type { SourcePresence } from './source-presence.js';
import { mergeVerdictTags, type ScanStatus, type VerdictTagNames } from './verdict-tags.js';

/** How often finished scans and due write-backs are looked for. */
export const BUCKET_VERDICTS_INTERVAL_MS = 1_000;
/** The longest wait before a failed write-back is tried again. */
const MAX_WRITE_RETRY_MS = 5 * 60_000;
/** A row whose job is neither queued nor recorded this long after its announcement is an orphan. */
const ORPHAN_AFTER_MS = 60_000;
const BATCH = 100;
/** Write-backs under way at once in a process. */
const WRITE_CONCURRENCY = 8;

/** What the verdicts do, for the metrics. */
export interface BucketVerdictEvents {
  /** An object's scan ended: `previous` is its status before (null: its first scan). */
  verdictGiven(source: BucketSource, status: ScanStatus, previous: string | null): void;
  /** A threat moved to the quarantine or deleted. */
  threatHandled(source: BucketSource, action: 'quarantine' | 'delete'): void;
  /** A write-back that failed and waits (the bucket not answering) or was given up. */
  writeFailed(source: BucketSource, reason: 'outage' | 'denied' | 'no-room'): void;
}

/**
 * The verdicts of watched objects, written back: each finished scan's result becomes the object's
 * status (object-status.ts), then its tags (merged with its own), and for a threat the move to the
 * quarantine or the delete its source asks for. A write-back is leased, so processes sharing the
 * store never write one twice at once; a bucket that does not answer is tried again later, with
 * nothing lost. An object replaced since it was read is not given the old bytes' verdict: its new
 * bytes are scanned. Rows whose job never came (the process died in between) are announced again.
 */
export class BucketVerdicts extends PeriodicTask {
  constructor(
    private readonly store: Store,
    private readonly presence: SourcePresence,
    private readonly clients: BucketClients,
    private readonly intake: BucketIntake,
    private readonly tagNames: VerdictTagNames,
    private readonly events: BucketVerdictEvents,
    private readonly log: Logger,
    /** A write-back taken by a process is its own this long (ASSAY_JOB_LEASE), then due again. */
    private readonly leaseMs: number,
    intervalMs = BUCKET_VERDICTS_INTERVAL_MS,
  ) {
    super(() => this.writeBackRound(), intervalMs, log, 'writing back bucket verdicts');
  }

  private async writeBackRound(): Promise<void> {
    // No source, no object rows (removing a source removes them): nothing to collect or write.
    if (!(await this.presence.any())) return;
    await this.collect();
    await this.writeDue();
    await this.announceOrphans();
  }

  /** Finished scans become their object's verdict, due to be written back now. */
  private async collect(): Promise<void> {
    const sources = new Map<string, BucketSource | null>();
    for (const scan of await this.store.bucketObjects.finishedScans(BATCH)) {
      const { object } = scan;
      if (object.jobId === null) continue;
      const status = statusOfResult(scan.findings, scan.error);
      const recorded = await this.store.bucketObjects.recordVerdict(
        object,
        object.jobId,
        { status, scannedAt: scan.creationDate },
        Date.now(),
      );
      if (!recorded) continue;
      if (!sources.has(object.sourceId)) {
        sources.set(object.sourceId, await this.store.bucketSources.find(object.sourceId));
      }
      const source = sources.get(object.sourceId);
      if (source) this.events.verdictGiven(source, status, object.status);
    }
  }

  /** The write-backs due, WRITE_CONCURRENCY at once (each is a few round trips to S3). */
  private async writeDue(): Promise<void> {
    const due = await this.store.bucketObjects.takeDueWrites(Date.now(), this.leaseMs, BATCH);
    let next = 0;
    const writer = async () => {
      for (let object = due[next++]; object !== undefined; object = due[next++]) {
        await this.writeOne(object);
      }
    };
    await Promise.all(Array.from({ length: WRITE_CONCURRENCY }, writer));
  }

  /** Never throws: a write-back whose outcome could not be stored is due again when its lease ends. */
  private async writeOne(object: BucketObject): Promise<void> {
    try {
      const source = await this.store.bucketSources.find(object.sourceId);
      if (source === null) {
        await this.store.bucketObjects.written(object);
        return;
      }
      try {
        await this.writeBack(source, object);
      } catch (error) {
        await this.failed(source, object, error);
        return;
      }
      await this.store.bucketObjects.written(object);
    } catch (error) {
      this.log.error(
        { err: error, key: object.key },
        'could not record a write-back; it is due again when its lease ends',
      );
    }
  }

  private async writeBack(source: BucketSource, object: BucketObject): Promise<void> {
    const client = this.clients.client(source);
    const version: ObjectVersion = {
      key: object.key,
      etag: object.etag,
      versionId: object.versionId,
    };
    if (object.versionId === null) {
      // No version to pin the tags to: the object must still hold the bytes that were scanned.
      const head = await client.head(object.key);
      if (head === null) return;
      if (object.etag !== null && head.etag !== object.etag) {
        await this.intake.announce(
          source,
          { key: object.key, etag: head.etag, versionId: head.versionId, size: head.size },
          'event',
        );
        return;
      }
    }
    const status = (object.status ?? 'FAILED') as ScanStatus;
    const result =
      object.resultId === null
        ? null
        : await this.store.files.findForAccount(source.accountId, object.resultId);
    const tags = mergeVerdictTags(
      await client.tags(version),
      {
        status,
        findings: result?.findings ?? [],
        scannedAt: object.scannedAt ?? new Date().toISOString(),
      },
      this.tagNames,
    );
    if (tags === null) {
      this.log.warn(
        { source: source.name, key: object.key },
        'the object has 10 tags of its own: no room for its verdict',
      );
      this.events.writeFailed(source, 'no-room');
    } else {
      await client.putTags(version, tags);
    }
    if (status !== 'THREATS_FOUND' || source.onThreat === 'tag') return;
    if (source.onThreat === 'quarantine' && source.quarantine !== null) {
      const [bucket = '', ...prefix] = source.quarantine.split('/');
      const target = [...prefix, object.key].filter((part) => part !== '').join('/');
      await client.copyTo(version, bucket, target);
      await client.remove(version);
      this.events.threatHandled(source, 'quarantine');
    } else if (source.onThreat === 'delete') {
      await client.remove(version);
      this.events.threatHandled(source, 'delete');
    }
  }

  private async failed(source: BucketSource, object: BucketObject, error: unknown): Promise<void> {
    const failure = error instanceof BucketRequestError ? error.failure : 'outage';
    if (failure === 'missing') {
      // Deleted meanwhile: nothing left to tag.
      await this.store.bucketObjects.written(object);
      return;
    }
    if (failure === 'changed') {
      // Replaced between the ETag check and the copy to the quarantine: its new bytes are scanned.
      await this.store.bucketObjects.written(object);
      const head = await this.clients.client(source).head(object.key);
      if (head !== null) {
        await this.intake.announce(
          source,
          { key: object.key, etag: head.etag, versionId: head.versionId, size: head.size },
          'event',
        );
      }
      return;
    }
    if (failure === 'denied' || failure === 'unsupported') {
      this.log.warn(
        { err: error, source: source.name, key: object.key },
        'may not write the verdict of an object back; it stays as it is',
      );
      this.events.writeFailed(source, 'denied');
      await this.store.bucketObjects.written(object);
      return;
    }
    const delay = Math.min(1000 * 2 ** object.writeAttempts, MAX_WRITE_RETRY_MS);
    this.log.warn(
      { err: error, source: source.name, key: object.key, retryInMs: delay },
      'could not write the verdict of an object back; will try again',
    );
    this.events.writeFailed(source, 'outage');
    await this.store.bucketObjects.writeFailed(object, Date.now() + delay);
  }

  private async announceOrphans(): Promise<void> {
    const before = new Date(Date.now() - ORPHAN_AFTER_MS).toISOString();
    for (const orphan of await this.store.bucketObjects.orphans(before, BATCH)) {
      if (orphan.jobId === null) continue;
      await this.store.bucketObjects.dropScan(orphan, orphan.jobId);
      const source = await this.store.bucketSources.find(orphan.sourceId);
      if (source === null) continue;
      await this.intake
        .announce(
          source,
          { key: orphan.key, etag: orphan.etag, versionId: orphan.versionId, size: orphan.size },
          'event',
        )
        .catch((error: unknown) =>
          this.log.warn({ err: error, source: source.name }, 'could not announce an object again'),
        );
    }
  }
}
