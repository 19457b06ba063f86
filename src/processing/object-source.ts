import type { Job, TraceEvent } from '../domain/records.js';
import type { ContentSpool } from '../spool/content-spool.js';

/** Where a spooled download is written: the spool, the job's id, synced or not. */
export interface SpoolTarget {
  spool: ContentSpool;
  spoolId: string;
  durable: boolean;
}

/**
 * Objects of watched buckets, for the download stage of their jobs (kind `bucket`): a port, so that
 * processing names no bucket client. The object streams into the spool, pinned to the version
 * its job was announced with. A failure the object is to blame for (access denied, too large,
 * replaced or deleted since) is a RemoteContentError saying so; a bucket that does not answer is
 * a BucketUnavailableError, waited out.
 */
export interface ObjectSource {
  download(
    job: Job,
    maxBytes: number,
    target: SpoolTarget,
  ): Promise<{ key: string; size: number; downloaded: TraceEvent }>;
}
