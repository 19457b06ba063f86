import type { Principal } from '../accounts/account-service.js';
import { newId } from '../accounts/credentials.js';
import { SpoolTooLargeError, SpoolUnavailableError } from '../domain/failures.js';
import type { Job, LegacyJobOptions } from '../domain/records.js';
import type { ContentSpool } from '../spool/content-spool.js';
import { ContentTooLargeError, EmptyContentError } from './errors.js';
import type { JobQueue } from './job-queue.js';
import type { SpoolQuota, SpoolReservation } from './spool-quota.js';

/** What comes with an item besides its content. */
export interface Submission {
  apiVersion: string;
  metadata: Record<string, string>;
  callback: string | null;
  /** v1.0 only: its callbacks, format and checksum. */
  legacy?: LegacyJobOptions;
  /** The name the client gave the file (keptFileName), for its result. */
  fileName?: string | null;
}

/**
 * Accepting asynchronous work: an upload is spooled (within the spool quota and its size limit)
 * and committed as a job, or leaves nothing behind; a fetch is committed as a job at once. The
 * answer (202, or v1.0's pending) is given only once the job is durable. An upload of at most
 * `inlineBytes` is kept in its job instead of the spool: durable with the job's commit, whose sync
 * the submissions accepted together share (no file to write, sync, rename, read and remove).
 */
export class Intake {
  constructor(
    private readonly spool: ContentSpool,
    private readonly quota: SpoolQuota,
    private readonly jobs: JobQueue,
    private readonly inlineBytes = 0,
  ) {}

  /**
   * Starts an upload of `declaredLength` bytes (NaN when unknown): its room in the spool is
   * reserved before a byte is read (the quota's 507/429 errors). End it with `end()` whatever
   * happens.
   */
  async beginUpload(
    principal: Principal,
    declaredLength: number,
    maxBytes: number,
    id: string = newId(),
  ): Promise<PendingUpload> {
    const reservation = await this.quota.reserve(principal.accountId, declaredLength);
    return new PendingUpload(this.spool, this.jobs, reservation, principal, maxBytes, id, {
      inlineBytes: this.inlineBytes,
    });
  }

  /**
   * Commits a fetch of `location` as a job (`bucket`: an object of a watched bucket, its location
   * `s3://bucket/key`); returns its id.
   */
  async acceptFetch(
    principal: Principal,
    location: string,
    submission: Submission,
    received: string,
    id: string = newId(),
    kind: 'fetch' | 'bucket' = 'fetch',
  ): Promise<string> {
    const receivedAt = new Date().toISOString();
    await this.jobs.submit(
      {
        ...jobOf(principal, id, submission, receivedAt),
        kind,
        location,
        spoolKey: null,
      },
      received,
    );
    return id;
  }
}

function jobOf(
  principal: Principal,
  id: string,
  submission: Submission,
  receivedAt: string,
): Omit<Job, 'kind' | 'location' | 'spoolKey'> {
  return {
    id,
    accountId: principal.accountId,
    apiKeyId: principal.keyId,
    apiVersion: submission.apiVersion,
    state: 'pending',
    metadata: submission.metadata,
    callback: submission.callback,
    attempts: 0,
    runAfter: receivedAt,
    creationDate: receivedAt,
    fileName: submission.fileName ?? null,
    ...(submission.legacy === undefined ? {} : { legacy: submission.legacy }),
  };
}

/** An upload under way: spool its content, then commit it; `end()` cleans up what was not. */
export class PendingUpload {
  private spooled: { key: string; size: number } | null = null;
  /** Content small enough to be kept in the job, whole. */
  private inline: Buffer | null = null;
  private committed = false;
  private readonly receivedAt = new Date().toISOString();

  constructor(
    private readonly spool: ContentSpool,
    private readonly jobs: JobQueue,
    private readonly reservation: SpoolReservation,
    private readonly principal: Principal,
    private readonly maxBytes: number,
    readonly id: string,
    private readonly options: { inlineBytes: number } = { inlineBytes: 0 },
  ) {}

  /**
   * Takes the content: kept whole when it ends within the inline size, else streamed into the
   * spool (what was read first included); ContentTooLargeError past the limit.
   */
  async store(content: AsyncIterable<Buffer>): Promise<{ size: number }> {
    if (this.spooled !== null || this.inline !== null) throw new Error('an upload has one content');
    const source = this.reservation.count(content)[Symbol.asyncIterator]();
    const limit = Math.min(this.options.inlineBytes, this.maxBytes);
    const head: Buffer[] = [];
    let headBytes = 0;
    for (;;) {
      const next = await source.next();
      if (next.done === true) {
        // Ended within the inline size (and so within the limit): kept in the job.
        this.inline = Buffer.concat(head, headBytes);
        return { size: headBytes };
      }
      head.push(next.value);
      headBytes += next.value.length;
      if (headBytes > limit) break;
    }
    const rest = async function* (): AsyncGenerator<Buffer> {
      try {
        yield* head;
        for (;;) {
          const next = await source.next();
          if (next.done === true) return;
          yield next.value;
        }
      } finally {
        // The spool stopped reading early (over the limit, a failed write): the source is closed.
        await source.return?.(undefined);
      }
    };
    try {
      this.spooled = await this.spool.write(this.id, rest(), this.maxBytes);
    } catch (error) {
      if (error instanceof SpoolTooLargeError) throw new ContentTooLargeError(this.maxBytes);
      throw error;
    }
    return { size: this.spooled.size };
  }

  /** Commits the job (durably, with the item's credit); EmptyContentError for empty content. */
  async commit(submission: Submission, received: (size: number) => string): Promise<string> {
    const size = this.inline?.length ?? this.spooled?.size;
    if (size === undefined) throw new Error('nothing was stored');
    if (size === 0) throw new EmptyContentError();
    await this.jobs.submit(
      {
        ...jobOf(this.principal, this.id, submission, this.receivedAt),
        kind: 'upload',
        location: null,
        spoolKey: this.spooled?.key ?? null,
        content: this.inline,
        size,
      },
      received(size),
    );
    this.committed = true;
    return this.id;
  }

  /**
   * Releases the reservation (the store counts a committed job's bytes from then on) and removes
   * content that no job refers to: whatever failed after the spooling (a second file part, a bad
   * field, the client going away, the commit) leaves nothing behind.
   */
  async end(): Promise<void> {
    try {
      if (!this.committed && this.spooled !== null) await this.spool.remove(this.spooled.key);
    } catch (error) {
      // The spool went out since: the orphan sweep removes it later, and the submission's own
      // error (a bad field, say) is the answer, not this one.
      if (!(error instanceof SpoolUnavailableError)) throw error;
    } finally {
      this.reservation.release(this.committed);
    }
  }
}
