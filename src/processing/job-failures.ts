import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';
import {
  BucketUnavailableError,
  isStoreUnavailable,
  publicCode,
  SpoolUnavailableError,
} from '../domain/failures.js';
import type { Job } from '../domain/records.js';
import type { ContentSpool } from '../spool/content-spool.js';
import type { Store } from '../store/store.js';
import { EngineProbe } from './engine-probe.js';
import { EngineUnavailableError } from './errors.js';
import type { JobRunnerOptions, JobSubmissions } from './job-work.js';
import type { ContentProcessor } from './process-content.js';

/** Room a scan needs on the engine's disk beyond the content's own size. */
const SCAN_ROOM_MARGIN = 1024 * 1024;
/** The longest wait between counted attempts. */
const MAX_RETRY_DELAY_MS = 10 * 60_000;
/** The longest wait between tries to put a job back while the store refuses writes. */
const MAX_STORE_RETRY_DELAY_MS = 60_000;

/** What a job's trace says of a database out of reach (its address and error are logged). */
const STORE_UNREACHABLE = 'the database could not be reached';

/** Recording a job's outcome failed (a store write): nothing is the item's fault. */
export class RecordingError extends Error {}

/** How a job's attempt left it: finished (a result), or back in the due list for a later one. */
export type JobEnd = 'ended' | 'put back';

/** What a job waits for: a new kind of wait gets its own trace line. */
type Outage = 'engine' | 'store' | 'spool' | 'bucket';

/**
 * What a failed job attempt means, and what becomes of the job: an outage of the engine, the
 * spool (SpoolUnavailableError: its directory or bucket does not answer; one item's missing
 * content is not one), a watched bucket (BucketUnavailableError) or a store that refuses writes
 * is waited out without using an attempt, up
 * to `maxAgeMs`; any other failure counts, retried with a doubling delay until `maxAttempts`; a
 * job out of either ends as a result with `error`, never clean. An engine failure is probed
 * (EngineProbe): if the engine scans other content, the item is to blame.
 */
export class JobFailures {
  private readonly probe: EngineProbe;
  /** Jobs whose wait is in their trace already, and for what: one line per wait, not per retry. */
  private readonly waiting = new Map<string, Outage>();

  constructor(
    private readonly store: Store,
    private readonly spool: ContentSpool,
    private readonly processor: ContentProcessor,
    private readonly options: JobRunnerOptions,
    private readonly logger: Logger,
    /** Aborted at shutdown: a job waiting for the store is left to its lease. */
    private readonly stopping: AbortSignal,
    private readonly submissions: JobSubmissions,
  ) {
    this.probe = new EngineProbe(processor);
  }

  /** The job's attempt ended with an outcome: a later wait is noted in its trace again. */
  succeeded(job: Job): void {
    this.waiting.delete(job.id);
  }

  /** Attempts are counted at the claim: this job's attempts ended without an outcome. */
  async exhausted(job: Job): Promise<JobEnd> {
    const lastError = job.lastError ?? null;
    const last =
      lastError === null
        ? 'ended without an outcome (the process may have stopped during it)'
        : `failed: ${lastError}`;
    await this.giveUp(job, `gave up after ${job.attempts - 1} attempts; the last ${last}`);
    return 'ended';
  }

  /**
   * The store refused to record what became of the job (say, the disk is full). The job keeps its
   * slot and is put back, its attempt not counted, as soon as the store takes writes again; at
   * shutdown, or if this process dies, its lease brings it back instead.
   */
  async releaseWhenPossible(job: Job, error: unknown): Promise<JobEnd> {
    this.logger.error(
      { err: error, job: job.id },
      'could not record what became of a job; it is released once the store takes writes again',
    );
    for (let delay = this.options.engineRetryMs; !this.stopping.aborted; ) {
      await sleep(delay, undefined, { signal: this.stopping }).catch(() => {});
      if (this.stopping.aborted) break;
      try {
        await this.store.jobs.release(job.id, new Date().toISOString(), { refund: true });
        this.logger.info({ job: job.id }, 'job released after the store failed');
        break;
      } catch (retryError) {
        this.logger.error({ err: retryError, job: job.id }, 'could not release a job yet');
      }
      delay = Math.min(2 * delay, MAX_STORE_RETRY_DELAY_MS);
    }
    return 'put back';
  }

  /** False when the engine shares the data dir's disk and that disk cannot hold the content. */
  private async roomToScan(job: Job): Promise<boolean> {
    if (this.options.engineSharesDataDisk !== true) return true;
    try {
      return await this.spool.hasRoom((job.size ?? 0) + SCAN_ROOM_MARGIN);
    } catch (error) {
      this.logger.warn({ err: error }, 'could not read the free space of the data dir');
      return true;
    }
  }

  /** Decides what a failed attempt means: an outage to wait out, or a counted failure. */
  async failed(job: Job, error: unknown): Promise<JobEnd> {
    const failedAt = Date.now();
    if (error instanceof RecordingError) {
      // The store, not the item: wait like an outage (the writes below may fail as well).
      this.logger.error({ err: error.cause, job: job.id }, 'could not record a job outcome');
      // The trace is the client's: the database's address stays in the log.
      const cause = isStoreUnavailable(error.cause) ? STORE_UNREACHABLE : describe(error.cause);
      return this.waitOut(job, 'store', `${error.message}: ${cause}`);
    }
    // The spool does not answer (the cause, naming its path or bucket, goes to the log only).
    if (error instanceof SpoolUnavailableError) {
      this.logger.warn({ err: error, job: job.id }, 'the spool is not answering');
      return this.waitOut(job, 'spool', error.message);
    }
    // A watched bucket does not answer: its objects wait for it.
    if (error instanceof BucketUnavailableError) {
      this.logger.warn({ err: error, job: job.id }, 'a watched bucket is not answering');
      return this.waitOut(job, 'bucket', error.message);
    }
    // A read the work needed (the job's key, say) found the store out of reach. (An engine's or an
    // S3 spool's refused connection looks the same: those are told apart above and below.)
    if (!(error instanceof EngineUnavailableError) && isStoreUnavailable(error)) {
      this.logger.error({ err: error, job: job.id }, 'the store failed during a job');
      return this.waitOut(job, 'store', STORE_UNREACHABLE);
    }
    // Content that never reached the engine (down or restarting) cannot have made it fail.
    if (
      error instanceof EngineUnavailableError &&
      (error.notReached || !(await this.probe.answers(failedAt)))
    ) {
      return this.waitOut(job, 'engine', error.message);
    }
    // The probe's few bytes found room; this item's temporary copy may not have: a full disk.
    if (error instanceof EngineUnavailableError && !(await this.roomToScan(job))) {
      return this.waitOut(job, 'engine', `${error.message}; the disk has no room to scan it`);
    }
    // The engine scans other content (or the failure is unexpected): this item counts it.
    const reason = describe(error);
    this.logger.warn(
      { err: error, job: job.id, attempt: job.attempts, maxAttempts: this.options.maxAttempts },
      'job attempt failed',
    );
    if (job.attempts >= this.options.maxAttempts) {
      await this.giveUp(job, `gave up after ${job.attempts} attempts; the last failed: ${reason}`);
      return 'ended';
    }
    const delay = Math.min(
      this.options.engineRetryMs * 2 ** (job.attempts - 1),
      Math.max(MAX_RETRY_DELAY_MS, this.options.engineRetryMs),
    );
    const retryAt = new Date(Date.now() + delay).toISOString();
    await this.store.transaction(async (store) => {
      await store.trace.append(
        job.id,
        `attempt ${job.attempts} of ${this.options.maxAttempts} failed: ${reason}; trying again at ${retryAt}`,
      );
      await store.jobs.release(job.id, retryAt, { refund: false, error: reason });
    });
    return 'put back';
  }

  /** A part fails for everyone: wait without using an attempt, up to the age limit. */
  private async waitOut(job: Job, outage: Outage, reason: string): Promise<JobEnd> {
    const ageMs = Date.now() - Date.parse(job.creationDate);
    if (ageMs >= this.options.maxAgeMs) {
      await this.giveUp(
        job,
        `could not be processed for ${Math.round(ageMs / 1000)} s, the most a job may wait (ASSAY_JOB_MAX_AGE); the last failure: ${reason}`,
      );
      return 'ended';
    }
    const retryAt = new Date(Date.now() + this.options.engineRetryMs).toISOString();
    const noted = this.waiting.get(job.id) === outage;
    await this.store.transaction(async (store) => {
      if (!noted) {
        await store.trace.append(
          job.id,
          `${reason}; waiting: tried again every ${this.options.engineRetryMs} ms, without using an attempt`,
        );
      }
      await store.jobs.release(job.id, retryAt, { refund: true });
    });
    this.waiting.set(job.id, outage);
    this.logger.warn(
      { job: job.id, retryAt, reason },
      `${outage} unavailable; job will be retried`,
    );
    return 'put back';
  }

  /** Ends a job as a result with `error`: never clean, the reason in its trace. */
  async giveUp(job: Job, reason: string): Promise<void> {
    this.logger.warn({ job: job.id, reason }, 'job ended with an error result');
    await this.processor.recordFailure(
      job.id,
      await this.submissions.of(job),
      reason,
      job.creationDate,
      [],
      job.creditHeld === true,
    );
    this.waiting.delete(job.id);
    await this.removeSpool(job);
  }

  /** After the outcome is stored; a file left behind is an orphan for the sweep, not a failure. */
  async removeSpool(job: Job): Promise<void> {
    if (job.spoolKey === null) return;
    await this.spool
      .remove(job.spoolKey)
      .catch((error: unknown) =>
        this.logger.error({ err: error, job: job.id }, 'could not remove a spool file'),
      );
  }
}

/**
 * A failure as the item's result and trace say it (clients read them): a system error by its code
 * and call, since Node's message names the file; the log has the whole error.
 */
function describe(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const { path, syscall } = error as NodeJS.ErrnoException;
  if (typeof path === 'string') {
    return `${publicCode(error) ?? 'file system error'}${syscall === undefined ? '' : ` (${syscall})`}`;
  }
  return error.message;
}
