import { newId } from '../accounts/credentials.js';
import type { BucketSource } from '../domain/records.js';
import type { Intake } from '../processing/intake.js';
import type { Store } from '../store/store.js';
import type { ObjectVersion } from './bucket-client.js';
import { objectJob } from './object-jobs.js';

/** Where an announcement came from: an event (SQS or webhook), a listing, or a rescan. */
export type AnnouncementOrigin = 'event' | 'listing' | 'rescan';

/** What became of an announcement. */
export type Announced =
  /** A scan of the object is queued. */
  | 'queued'
  /** The same bytes are being scanned already (an event delivered twice). */
  | 'in-flight'
  /** The same bytes have a verdict already (a listing passing a scanned object). */
  | 'known'
  /** Not under the source's bucket and prefix. */
  | 'outside';

/** The source's key cannot act (missing or disabled): its objects wait, announced again later. */
export class SourceKeyError extends Error {
  override readonly name = 'SourceKeyError';
}

export interface AnnouncedObject extends ObjectVersion {
  bucket?: string;
  size: number | null;
}

/** The port the key's principal is read through (AccountService.principalForKey). */
export interface SourcePrincipals {
  principalForKey(keyId: string): Promise<Parameters<Intake['acceptFetch']>[0] | null>;
}

/**
 * Turns an announced object into an async item of its source's key, once per version: the
 * object's row is written first (its scan in flight), then the job, so a job never lacks its row
 * (a row whose job never came is an orphan BucketVerdicts finds). A version already in flight
 * or, except for a rescan, already scanned is not queued again.
 */
export class BucketIntake {
  constructor(
    private readonly store: Store,
    private readonly principals: SourcePrincipals,
    private readonly intake: Intake,
    /** The signature set scans use now (ServiceTag's digest), kept with the object's verdict. */
    private readonly signatures: () => Promise<string | null>,
    private readonly onAnnounced: (
      source: BucketSource,
      origin: AnnouncementOrigin,
      outcome: Announced,
    ) => void = () => {},
  ) {}

  async announce(
    source: BucketSource,
    object: AnnouncedObject,
    origin: AnnouncementOrigin,
  ): Promise<Announced> {
    const outcome = await this.decide(source, object, origin);
    this.onAnnounced(source, origin, outcome);
    return outcome;
  }

  private async decide(
    source: BucketSource,
    object: AnnouncedObject,
    origin: AnnouncementOrigin,
  ): Promise<Announced> {
    if (
      (object.bucket !== undefined && object.bucket !== source.bucket) ||
      !object.key.startsWith(source.prefix)
    ) {
      return 'outside';
    }
    const known = await this.store.bucketObjects.find(source.id, object.key);
    const sameBytes =
      known !== null &&
      known.etag !== null &&
      known.etag === object.etag &&
      (object.versionId === null || known.versionId === object.versionId);
    if (sameBytes && known.jobId !== null) return 'in-flight';
    if (sameBytes && known.status !== null && origin !== 'rescan') return 'known';
    const principal = await this.principals.principalForKey(source.apiKeyId);
    if (principal === null) {
      throw new SourceKeyError(
        `the key of the bucket source ${source.name} is missing or disabled`,
      );
    }
    const id = newId();
    const now = new Date().toISOString();
    await this.store.bucketObjects.startScan(
      {
        sourceId: source.id,
        key: object.key,
        etag: object.etag,
        versionId: object.versionId,
        size: object.size,
        signatures: await this.signatures(),
      },
      id,
      now,
    );
    const { location, metadata } = objectJob(source, object);
    try {
      await this.intake.acceptFetch(
        principal,
        location,
        { apiVersion: 'v2.2', metadata, callback: source.callback },
        `${RECEIVED[origin]} of the bucket source ${source.name}`,
        id,
        'bucket',
      );
    } catch (error) {
      // Not queued (no balance left, the store failing): the object is announced again later.
      await this.store.bucketObjects
        .dropScan({ sourceId: source.id, key: object.key }, id)
        .catch(() => {});
      throw error;
    }
    return 'queued';
  }
}

const RECEIVED: Record<AnnouncementOrigin, string> = {
  event: 'announced by an event',
  listing: 'found by a listing',
  rescan: 'scanned again after a change of signatures',
};
