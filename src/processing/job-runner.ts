import type { Logger } from 'pino';
import type { OutboundOptions } from '../outbound/guarded-http.js';
import type { Job, TraceEvent } from '../store/records.js';
import type { Spool } from '../store/spool.js';
import type { Store } from '../store/store.js';
import { ContentNotExaminedError, EngineUnavailableError } from './errors.js';
import type { SubmissionVersion } from './file-result.js';
import { LEGACY_CATEGORIES } from './legacy-result.js';
import type { ContentProcessor, ScannedContent, Submission } from './process-content.js';
import { fetchAndScan, RemoteContentError } from './remote-content.js';
import { WorkLoop } from './work-loop.js';

export interface JobRunnerOptions {
  concurrency: number;
  /** Wait before trying again a job whose engine could not scan. */
  engineRetryMs: number;
  fetch: OutboundOptions & { maxBytes: number };
  /** v1.0 jobs' limits: uploads up to the legacy POST size, fetches up to the engine's. */
  legacy: { maxPostBytes: number; maxFetchBytes: number };
}

/** A job that fails this often for reasons other than the engine becomes an error result. */
const MAX_ATTEMPTS = 10;

/**
 * Runs asynchronous work (spooled uploads, remote fetches) until each has a recorded result.
 * A job whose engine is down waits and is tried again; it never becomes a clean result.
 */
export class JobRunner {
  private readonly active = new Map<string, Promise<void>>();
  private readonly loop: WorkLoop;

  constructor(
    private readonly store: Store,
    private readonly spool: Spool,
    private readonly processor: ContentProcessor,
    private readonly options: JobRunnerOptions,
    private readonly logger: Logger,
  ) {
    this.loop = new WorkLoop(
      () => this.tick(),
      (error) => this.logger.error({ err: error }, 'job loop round failed'),
    );
  }

  /** Resumes what a previous process left unfinished, then runs jobs as they come. */
  async start(): Promise<void> {
    const resumed = await this.store.jobs.resetProcessing();
    if (resumed > 0) this.logger.info({ resumed }, 'resuming unfinished jobs');
    this.loop.start();
  }

  /**
   * Stores a job with its first trace event, durably (it answers a 202, a promise that must
   * survive power loss); it runs as soon as a slot is free.
   */
  async submit(job: Job, received: string): Promise<void> {
    await this.store.durableTransaction(async (store) => {
      await store.jobs.insert(job);
      await store.trace.append(job.id, received, job.creationDate);
    });
    this.loop.notify();
  }

  /** Takes no new jobs, lets running ones finish for up to `graceMs`, then parks the rest. */
  async stop(graceMs: number): Promise<void> {
    await this.loop.stop();
    const running = [...this.active.keys()];
    const timeout = new Promise<'timeout'>((resolve) =>
      setTimeout(resolve, graceMs, 'timeout').unref(),
    );
    if ((await Promise.race([Promise.all(this.active.values()), timeout])) === 'timeout') {
      const parked = running.filter((id) => this.active.has(id));
      for (const id of parked) await this.store.jobs.release(id, new Date().toISOString());
      this.logger.warn({ parked }, 'jobs still running at shutdown were parked for the next start');
    }
  }

  private async tick(): Promise<number> {
    const free = this.options.concurrency - this.active.size;
    if (free <= 0) return 60_000; // a finishing job wakes the loop
    const now = new Date().toISOString();
    const due = (await this.store.jobs.due(now, free + this.active.size)).filter(
      (id) => !this.active.has(id),
    );
    for (const id of due.slice(0, free)) {
      const job = await this.store.jobs.claim(id);
      if (job === null) continue; // another worker took it
      const run = this.run(job).finally(() => {
        this.active.delete(job.id);
        this.loop.notify();
      });
      this.active.set(job.id, run);
    }
    const next = await this.store.jobs.nextDue();
    if (next === null) return 1000;
    return Math.min(1000, Date.parse(next) - Date.now());
  }

  private async run(job: Job): Promise<void> {
    try {
      await this.process(job);
    } catch (error) {
      const retryAt = new Date(Date.now() + this.options.engineRetryMs).toISOString();
      if (error instanceof EngineUnavailableError) {
        await this.store.trace.append(job.id, `${error.message}; trying again at ${retryAt}`);
        await this.store.jobs.release(job.id, retryAt);
        this.logger.warn({ job: job.id, retryAt }, 'engine unavailable; job will be retried');
        return;
      }
      this.logger.error({ err: error, job: job.id, attempt: job.attempts }, 'job failed');
      if (job.attempts >= MAX_ATTEMPTS) {
        await this.processor.recordFailure(
          job.id,
          await this.submissionOf(job),
          'processing failed repeatedly',
          job.creationDate,
          [],
        );
        await this.removeSpool(job);
      } else {
        await this.store.jobs.release(job.id, retryAt);
      }
    }
  }

  private async process(job: Job): Promise<void> {
    const submission = await this.submissionOf(job);
    try {
      const { scanned, events } = await this.scanJob(job, submission);
      await this.processor.record(scanned, submission, { jobId: job.id, events });
    } catch (error) {
      // A failed download, or content no engine can decide on (a corrupt image, a document past
      // its caps), is the same on every retry: a finished job with an error, never clean.
      if (!(error instanceof RemoteContentError || error instanceof ContentNotExaminedError)) {
        throw error;
      }
      await this.processor.recordFailure(job.id, submission, error.message, job.creationDate, []);
    }
    await this.removeSpool(job);
  }

  /** The job's content, spooled or downloaded, through the engines of its key's categories. */
  private async scanJob(
    job: Job,
    submission: Submission,
  ): Promise<{ scanned: ScannedContent; events: TraceEvent[] }> {
    const legacy = submission.version === 'v1.0' ? this.options.legacy : null;
    const categories = submission.principal.detectionCategories;
    if (job.kind === 'upload') {
      if (job.spoolPath === null) throw new Error(`upload job ${job.id} has no spool file`);
      const scanned = await this.processor.scan(this.spool.read(job.spoolPath), {
        categories,
        receivedAt: job.creationDate,
        maxBytes: legacy?.maxPostBytes,
      });
      return { scanned, events: [] };
    }
    const { scanned, downloaded } = await fetchAndScan(
      this.processor,
      job.location ?? '',
      legacy === null
        ? this.options.fetch
        : { ...this.options.fetch, maxBytes: legacy.maxFetchBytes },
      job.creationDate,
      categories,
    );
    return { scanned, events: [downloaded] };
  }

  private async submissionOf(job: Job): Promise<Submission> {
    const key = await this.store.apiKeys.find(job.apiKeyId);
    return {
      principal: {
        accountId: job.accountId,
        keyId: job.apiKeyId,
        tokenId: null,
        detectionCategories:
          job.apiVersion === 'v1.0' ? [...LEGACY_CATEGORIES] : (key?.detectionCategories ?? []),
        // Accepted work is finished even if the balance ran out since: it was paid for at submission.
        balanceExhausted: false,
        // Rate limits apply to requests; the job's request was already counted.
        rateLimit: null,
      },
      version: job.apiVersion as SubmissionVersion,
      metadata: job.metadata,
      callback: job.callback,
      legacy: job.legacy ?? null,
    };
  }

  private async removeSpool(job: Job): Promise<void> {
    if (job.spoolPath !== null) await this.spool.remove(job.spoolPath);
  }
}
