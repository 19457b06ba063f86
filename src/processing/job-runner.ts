import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';
import type { Job, JobStage, TraceEvent } from '../domain/records.js';
import type { ContentSpool } from '../spool/content-spool.js';
import type { Store } from '../store/store.js';
import { EngineProbe } from './engine-probe.js';
import { BalanceSpentError, ContentNotExaminedError, EngineUnavailableError } from './errors.js';
import { FairClaims } from './fair-claims.js';
import type { JobQueue } from './job-queue.js';
import { downloadJob, type JobRunnerOptions, scanJob, submissionOf } from './job-work.js';

import type { ContentProcessor } from './process-content.js';
import { RemoteContentError } from './remote-content.js';
import type { WorkDelivery } from './work-delivery.js';
import { WorkLoop } from './work-loop.js';

/** Room a scan needs on the engine's disk beyond the content's own size. */
const SCAN_ROOM_MARGIN = 1024 * 1024;

/** The longest wait between counted attempts. */
const MAX_RETRY_DELAY_MS = 10 * 60_000;
/** The longest wait between tries to put a job back while the store refuses writes. */
const MAX_STORE_RETRY_DELAY_MS = 60_000;

/** How often a delivering runner looks for jobs whose worker died (their lease ended). */
const LEASE_SWEEP_MS = 1000;

/** Recording a job's outcome failed (a store write): nothing is the item's fault. */
class RecordingError extends Error {}

/**
 * Runs asynchronous work (spooled uploads, remote fetches) until each has a recorded result.
 *
 * - Two stages with slots of their own: a fetch is downloaded into the spool (a download slot,
 *   all a remote that never answers holds), then scanned like an upload (a scanning slot).
 * - Claims are leases in the store, renewed while the job runs: a job whose worker died is claimed
 *   again when the lease ends, by this process or another. Which job to claim next comes from the
 *   store's due list, fairly (FairClaims, SQLite), or from a WorkDelivery (pg-boss on PostgreSQL,
 *   the account as the group): each delivery names a job, claimed as in the store.
 * - Attempts are counted at the claim, so a job whose processing ends the process stops after
 *   `maxAttempts` instead of ending it at every start.
 * - An engine failure is probed (EngineProbe): if the engine scans other content, the item is to
 *   blame and the attempt counts; if not, it is an outage, and the job waits without using an
 *   attempt, up to `maxAgeMs`. A job that runs out of either ends as a result with `error`, never
 *   a clean verdict.
 * - A failed store write never ends the loop: it is logged, and the job is put back (its attempt
 *   not counted) once the store takes writes again.
 */
export class JobRunner implements JobQueue {
  private readonly active = new Map<string, Promise<void>>();
  /** Jobs of each stage running in this process. */
  private readonly stageRunning: Record<JobStage, Set<string>> = {
    download: new Set(),
    scan: new Set(),
  };
  private readonly loop: WorkLoop;
  private readonly probe: EngineProbe;
  /** Jobs whose wait for the engine is in their trace already: one line per wait, not per retry. */
  private readonly waiting = new Set<string>();
  private readonly claims: FairClaims;
  private leaseTimer: NodeJS.Timeout | undefined;
  private sweepTimer: NodeJS.Timeout | undefined;
  private readonly stopping = new AbortController();

  /** @param delivery where due jobs come from; by default the store's due list (WorkLoop). */
  constructor(
    private readonly store: Store,
    private readonly spool: ContentSpool,
    private readonly processor: ContentProcessor,
    private readonly options: JobRunnerOptions,
    private readonly logger: Logger,
    private readonly delivery?: WorkDelivery,
  ) {
    this.probe = new EngineProbe(processor);
    this.claims = new FairClaims(store, options.stages, options.leaseMs);
    this.loop = new WorkLoop(
      () => this.tick(),
      (error) => this.logger.error({ err: error }, 'job loop round failed'),
    );
  }

  /**
   * Runs jobs as they come. What a previous process left unfinished runs again once its lease
   * ends.
   */
  async start(): Promise<void> {
    const count = await this.store.jobs.inFlight(new Date().toISOString());
    if (count > 0) {
      this.logger.info(
        { jobs: count, leaseMs: this.options.leaseMs },
        'jobs claimed before (by a process that stopped?) resume when their lease ends',
      );
    }
    this.leaseTimer = setInterval(() => void this.renewLeases(), this.options.leaseMs / 3);
    this.leaseTimer.unref();
    if (this.delivery === undefined) {
      this.loop.start();
      return;
    }
    // Jobs written without a dispatch (migrate-store, an older version) are announced once.
    const announced = await this.store.jobs.redispatch({ unheldAt: new Date().toISOString() });
    if (announced > 0) this.logger.info({ jobs: announced }, 'jobs waiting were dispatched');
    for (const stage of ['scan', 'download'] as const) {
      const { slots, perAccount } = this.options.stages[stage];
      await this.delivery.deliver(stage, { slots, perAccount }, (id) => this.delivered(stage, id));
    }
    this.sweepTimer = setInterval(() => void this.sweepEndedLeases(), LEASE_SWEEP_MS);
    this.sweepTimer.unref();
  }

  /**
   * A delivered job: claimed and run to its end. One that cannot be claimed now (finished, not due
   * yet, held by a live worker, or in another stage) is announced again for when it can be; a
   * finished one is not, and its delivery ends.
   */
  private async delivered(stage: JobStage, id: string): Promise<void> {
    if (this.stopping.signal.aborted) throw new Error('stopping: delivered again later');
    const now = Date.now();
    const leaseUntil = new Date(now + this.options.leaseMs).toISOString();
    const job = await this.store.jobs.claim(id, new Date(now).toISOString(), leaseUntil, stage);
    if (job === null) {
      await this.store.jobs.redispatch({ id });
      return;
    }
    this.launch(stage, job);
    await this.active.get(job.id);
  }

  /** Jobs whose worker died (their lease ended unrenewed) are announced again. */
  private async sweepEndedLeases(): Promise<void> {
    try {
      const count = await this.store.jobs.redispatch({ leaseEndedBy: new Date().toISOString() });
      if (count > 0) this.logger.warn({ jobs: count }, 'jobs whose lease ended were dispatched');
    } catch (error) {
      this.logger.error({ err: error }, 'could not look for jobs whose lease ended');
    }
  }

  /**
   * Accepts an item: takes one credit from its account (BalanceSpentError when the account
   * enforces its balance and has none left) and stores its job with its first trace event, in one
   * transaction, durably (it answers a 202, a promise that must survive power loss); it runs as
   * soon as a slot is free. The caller removes what it spooled when this throws.
   */
  async submit(job: Job, received: string): Promise<void> {
    await this.store.durableTransaction(async (store) => {
      // The item's credit is taken with its job, or neither: refused when the balance is spent.
      if (!(await store.accounts.takeCredit(job.accountId))) throw new BalanceSpentError();
      await store.jobs.insert({ ...job, creditHeld: true });
      await store.trace.append(job.id, received, job.creationDate);
    });
    this.loop.notify();
  }

  /** Jobs this process is running now. */
  get running(): number {
    return this.active.size;
  }

  /** Takes no new jobs, lets running ones finish for up to `graceMs`, then parks the rest. */
  async stop(graceMs: number): Promise<void> {
    clearInterval(this.sweepTimer);
    await this.loop.stop();
    if (this.delivery !== undefined) {
      await Promise.all(
        (['scan', 'download'] as const).map((stage) => this.delivery?.stopDelivering(stage)),
      );
    }
    const running = [...this.active.keys()];
    const timeout = new Promise<'timeout'>((resolve) =>
      setTimeout(resolve, graceMs, 'timeout').unref(),
    );
    const finished = await Promise.race([Promise.all(this.active.values()), timeout]);
    // Jobs still waiting for the store to take their outcome are parked (or left to their lease).
    this.stopping.abort();
    if (finished === 'timeout') {
      const parked = running.filter((id) => this.active.has(id));
      const now = new Date().toISOString();
      for (const id of parked) {
        // Not the job's fault: the attempt does not count. If the write fails, the lease ends it.
        await this.store.jobs
          .release(id, now, { refund: true })
          .catch((error: unknown) =>
            this.logger.error({ err: error, job: id }, 'could not park a job'),
          );
      }
      this.logger.warn({ parked }, 'jobs still running at shutdown were parked for the next start');
    }
    clearInterval(this.leaseTimer);
  }

  private async tick(): Promise<number> {
    let sleepMs = 60_000; // with every slot taken, a finishing job wakes the loop
    for (const stage of ['scan', 'download'] as const) {
      const free = this.options.stages[stage].slots - this.stageRunning[stage].size;
      if (free <= 0) continue;
      const atCap = await this.claims.claim(
        stage,
        free,
        (id) => this.active.has(id),
        (job) => this.launch(stage, job),
      );
      // Due jobs left unclaimed: their accounts are at their cap; a finishing job wakes the loop.
      if (atCap) {
        sleepMs = Math.min(sleepMs, 1000);
        continue;
      }
      const next = await this.store.jobs.nextDue();
      sleepMs = Math.min(sleepMs, next === null ? 1000 : Date.parse(next) - Date.now());
    }
    return sleepMs;
  }

  private launch(stage: JobStage, job: Job): void {
    this.stageRunning[stage].add(job.id);
    const run = this.run(job).finally(() => {
      this.active.delete(job.id);
      this.stageRunning[stage].delete(job.id);
      this.loop.notify();
    });
    this.active.set(job.id, run);
  }

  /** Never rejects: an outcome that cannot be stored is retried until the store takes it. */
  private async run(job: Job): Promise<void> {
    try {
      await this.attempt(job);
    } catch (error) {
      await this.releaseWhenPossible(job, error);
    }
  }

  private async attempt(job: Job): Promise<void> {
    if (job.attempts > this.options.maxAttempts) {
      // Counted when claimed: this job's attempts ended without an outcome, maybe the process.
      const lastError = job.lastError ?? null;
      const last =
        lastError === null
          ? 'ended without an outcome (the process may have stopped during it)'
          : `failed: ${lastError}`;
      await this.giveUp(job, `gave up after ${job.attempts - 1} attempts; the last ${last}`);
      return;
    }
    try {
      await this.process(job);
      this.waiting.delete(job.id);
    } catch (error) {
      await this.failed(job, error);
    }
  }

  /**
   * The store refused to record what became of the job (say, the disk is full). The job keeps its
   * slot and is put back, its attempt not counted, as soon as the store takes writes again; at
   * shutdown, or if this process dies, its lease brings it back instead.
   */
  private async releaseWhenPossible(job: Job, error: unknown): Promise<void> {
    this.logger.error(
      { err: error, job: job.id },
      'could not record what became of a job; it is released once the store takes writes again',
    );
    for (let delay = this.options.engineRetryMs; !this.stopping.signal.aborted; ) {
      await sleep(delay, undefined, { signal: this.stopping.signal }).catch(() => {});
      if (this.stopping.signal.aborted) return;
      try {
        await this.store.jobs.release(job.id, new Date().toISOString(), { refund: true });
        this.logger.info({ job: job.id }, 'job released after the store failed');
        return;
      } catch (retryError) {
        this.logger.error({ err: retryError, job: job.id }, 'could not release a job yet');
      }
      delay = Math.min(2 * delay, MAX_STORE_RETRY_DELAY_MS);
    }
  }

  private async process(job: Job): Promise<void> {
    const submission = await submissionOf(this.store, job);
    let outcome: () => Promise<unknown>;
    try {
      if (job.stage === 'download') {
        const spooled = await downloadJob(job, this.spool, this.options);
        outcome = () => this.downloaded(job, spooled);
      } else {
        const scanned = await scanJob(job, submission, this.processor, this.spool, this.options);
        outcome = () =>
          this.processor.record(scanned, submission, {
            jobId: job.id,
            creditHeld: job.creditHeld === true,
          });
      }
    } catch (error) {
      // A failed download, or content no engine can decide on (a corrupt image, a document past
      // its caps), is the same on every retry: a finished job with an error, never clean.
      if (!(error instanceof RemoteContentError || error instanceof ContentNotExaminedError)) {
        throw error;
      }
      const message = error.message;
      outcome = () =>
        this.processor.recordFailure(
          job.id,
          submission,
          message,
          job.creationDate,
          [],
          job.creditHeld === true,
        );
    }
    try {
      await outcome();
    } catch (error) {
      throw new RecordingError('the outcome could not be recorded', { cause: error });
    }
    // A downloaded fetch keeps its file for the scan; everything else is done with it.
    if (job.stage !== 'download') await this.removeSpool(job);
  }

  /** The download is in the spool: the job waits for a scanning slot, its trace saying so. */
  private async downloaded(
    job: Job,
    spooled: { key: string; size: number; downloaded: TraceEvent },
  ): Promise<void> {
    await this.store.transaction(async (store) => {
      await store.trace.append(job.id, spooled.downloaded.message, spooled.downloaded.timestamp);
      await store.jobs.downloaded(job.id, spooled, new Date().toISOString());
    });
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
  private async failed(job: Job, error: unknown): Promise<void> {
    const failedAt = Date.now();
    if (error instanceof RecordingError) {
      // The store, not the item: wait like an outage (the writes below may fail as well).
      this.logger.error({ err: error.cause, job: job.id }, 'could not record a job outcome');
      await this.waitForEngine(job, `${error.message}: ${describe(error.cause)}`);
      return;
    }
    // Content that never reached the engine (down or restarting) cannot have made it fail.
    if (
      error instanceof EngineUnavailableError &&
      (error.notReached || !(await this.probe.answers(failedAt)))
    ) {
      await this.waitForEngine(job, error.message);
      return;
    }
    // The probe's few bytes found room; this item's temporary copy may not have: a full disk.
    if (error instanceof EngineUnavailableError && !(await this.roomToScan(job))) {
      await this.waitForEngine(job, `${error.message}; the disk has no room to scan it`);
      return;
    }
    // The engine scans other content (or the failure is unexpected): this item counts it.
    const reason = describe(error);
    this.logger.warn(
      { err: error, job: job.id, attempt: job.attempts, maxAttempts: this.options.maxAttempts },
      'job attempt failed',
    );
    if (job.attempts >= this.options.maxAttempts) {
      await this.giveUp(job, `gave up after ${job.attempts} attempts; the last failed: ${reason}`);
      return;
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
  }

  /** The engine (or the store) fails for everyone: wait without using an attempt, up to the age limit. */
  private async waitForEngine(job: Job, reason: string): Promise<void> {
    const ageMs = Date.now() - Date.parse(job.creationDate);
    if (ageMs >= this.options.maxAgeMs) {
      await this.giveUp(
        job,
        `could not be processed for ${Math.round(ageMs / 1000)} s, the most a job may wait (ASSAY_JOB_MAX_AGE); the last failure: ${reason}`,
      );
      return;
    }
    const retryAt = new Date(Date.now() + this.options.engineRetryMs).toISOString();
    const noted = this.waiting.has(job.id);
    await this.store.transaction(async (store) => {
      if (!noted) {
        await store.trace.append(
          job.id,
          `${reason}; waiting: tried again every ${this.options.engineRetryMs} ms, without using an attempt`,
        );
      }
      await store.jobs.release(job.id, retryAt, { refund: true });
    });
    this.waiting.add(job.id);
    this.logger.warn({ job: job.id, retryAt, reason }, 'engine unavailable; job will be retried');
  }

  /** Ends a job as a result with `error`: never clean, the reason in its trace. */
  private async giveUp(job: Job, reason: string): Promise<void> {
    this.logger.warn({ job: job.id, reason }, 'job ended with an error result');
    await this.processor.recordFailure(
      job.id,
      await submissionOf(this.store, job),
      reason,
      job.creationDate,
      [],
      job.creditHeld === true,
    );
    this.waiting.delete(job.id);
    await this.removeSpool(job);
  }

  /** After the outcome is stored; a file left behind is an orphan for the sweep, not a failure. */
  private async removeSpool(job: Job): Promise<void> {
    if (job.spoolKey === null) return;
    await this.spool
      .remove(job.spoolKey)
      .catch((error: unknown) =>
        this.logger.error({ err: error, job: job.id }, 'could not remove a spool file'),
      );
  }

  /** Keeps the leases of running jobs; a failure only risks another worker taking one over. */
  private async renewLeases(): Promise<void> {
    try {
      const leaseUntil = new Date(Date.now() + this.options.leaseMs).toISOString();
      await this.store.jobs.renewLeases([...this.active.keys()], leaseUntil);
    } catch (error) {
      this.logger.error({ err: error }, 'could not renew the leases of running jobs');
    }
  }
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
