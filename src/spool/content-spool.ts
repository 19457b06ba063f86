import type { Readable } from 'node:stream';

/**
 * Where async content waits for its job: the data directory, a shared directory or an S3 bucket.
 * Jobs store the key, never where it lives, so any process with the same spool can read it.
 * LocalSpool (a directory) and S3Spool (a bucket) implement it; `openSpool` picks one.
 */
export interface ContentSpool {
  /** For logs: the directory or `s3://bucket/prefix at endpoint`; never a credential. */
  readonly describe: string;

  /** Prepares the backend (creates the directory, checks the bucket); fails clearly if unusable. */
  init(): Promise<void>;

  /**
   * Stores the content under `key` (a job id) as it streams, never whole in memory. Throws
   * SpoolTooLargeError past `maxBytes`, the source's own errors as they are, a full disk's as it
   * is (ENOSPC: see isDiskFull), and SpoolUnavailableError when the backend fails; a write that
   * fails leaves nothing behind. `durable: false` allows skipping syncs for content that is
   * worthless after a crash.
   */
  write(
    key: string,
    source: AsyncIterable<Buffer>,
    maxBytes: number,
    options?: { durable?: boolean },
  ): Promise<{ key: string; size: number }>;

  /**
   * The content of `key`, fetched lazily. A failure errors the stream: SpooledContentError when
   * the spool answers a check started after it (the key is missing, or only it cannot be read:
   * the item's failure), else SpoolUnavailableError (an outage).
   */
  read(key: string): Readable;

  /** Removes `key`; removing a missing key succeeds; SpoolUnavailableError when the backend fails. */
  remove(key: string): Promise<void>;

  /**
   * Removes content older than `graceMs` whose key `isReferenced` does not know (left by a
   * submission or process that died between the write and the job's commit); younger content may
   * be an upload in progress.
   */
  removeOrphans(
    graceMs: number,
    isReferenced: (key: string) => Promise<boolean>,
  ): Promise<{ files: number; bytes: number }>;

  /**
   * Resolves when the backend answers, else rejects with SpoolUnavailableError (readiness). Cheap
   * and shared (SpoolHealth): a stat of the directory, a HEAD of the bucket, reused for a second;
   * after an operation failed, an empty file or object is written and removed instead.
   */
  check(): Promise<void>;

  /** Whether a write found the backend full and it still is (object storage: never). */
  diskFull(uploadBytes: number): Promise<boolean>;

  /** Whether `bytes` more fit (object storage: always). */
  hasRoom(bytes: number): Promise<boolean>;

  /** A write beside the spool (the store's) found the disk full. */
  noteDiskFull(): void;

  /** Releases connections (S3's); the spool is not used afterwards. */
  close(): void;
}
