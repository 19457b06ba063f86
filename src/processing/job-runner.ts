import type { Logger } from 'pino';
import type { Job, JobStage } from '../domain/records.js';
import type { ContentSpool } from '../spool/content-spool.js';
import { GroupedCommits } from '../store/grouped-commits.js';
import { type Acceptance, stageOf } from '../store/job-acceptance.js';
import { StatementGroups } from '../store/statement-groups.js';
import type { Store } from '../store/store.js';
import { ClaimShortcuts } from './claim-shortcuts.js';
import { DownloadJob } from './download-job.js';
import { BalanceSpentError, ContentNotExaminedError } from './errors.js';
import { FairClaims } from './fair-claims.js';
import { type JobEnd, JobFailures, RecordingError } from './job-failures.js';
import type { JobQueue } from './job-queue.js';
import {
  type JobOutcome,
  type JobRunnerOptions,
  JobSubmissions,
  type JobWork,
} from './job-work.js';
import type { ContentProcessor } from './process-content.js';
import { RemoteContentError } from './remote-content.js';
import type { SlotHandOff } from './result-recorder.js';
import { ScanJob } from './scan-job.js';
import type { DueSignals } from './work-delivery.js';
import { WorkLoop } from './work-loop.js';

const STAGES = ['scan', 'download'] as const;

/**
 * How long a round that found nothing due may leave the due list unread: other processes sharing
 * the store add jobs without telling this one on SQLite; on PostgreSQL they signal each due job
 * (NOTIFY), and a poll only backs up a lost signal.
 */
const JOB_LOOK_MS = { unsignalled: 1000, signalled: 30_000 } as const;

/**
 * Runs asynchronous work (spooled uploads, remote fetches) until each has a recorded result.
 *
 * - Two stages with slots of their own: a fetch is downloaded into the spool (a download slot,
 *   all a remote that never answers holds), then scanned like an upload (a scanning slot).
 * - Claims are leases in the store, renewed while the job runs: a job whose worker died is claimed
 *   again when the lease ends, by this process or another. Which job to claim next comes from the
 *   store's due list, fairly (FairClaims), on both stores: on PostgreSQL other processes' due
 *   jobs are signalled (DueSignals), on SQLite looked for every second.
 * - Each stage's work is a JobWork (DownloadJob, ScanJob).
 * - Attempts are counted at the claim, so a job whose processing ends the process stops after
 *   `maxAttempts` instead of ending it at every start. What a failed attempt means is JobFailures'
 *   to decide: an outage is waited out, a failure of the item counts; never a clean verdict.
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
  /** Stages with news since their last round (a submission, a finished job): a woken round looks at these only. */
  private readonly dirty = new Set<JobStage>();
  /** When each stage's round asked to look again (epoch ms), whatever wakes the loop meanwhile. */
  private readonly lookAgainAt: Record<JobStage, number> = { scan: 0, download: 0 };
  private readonly claims: FairClaims;
  /** Claims without a round while nothing else waits (due list only): claim-shortcuts.ts. */
  private readonly shortcuts: ClaimShortcuts;
  /** The job each ending job handed its slot to, run once the ending one is gone. */
  private readonly handedOff = new Map<string, Job>();
  /** Submissions accepted together share a transaction and its sync (SQLite)... */
  private readonly submissions: GroupedCommits;
  /** ...or a statement (PostgreSQL: JobRepository.acceptMany), its signals included. */
  private readonly acceptances: StatementGroups<Acceptance, boolean> | null;
  /** What each job was submitted as (its key's categories read once per ASSAY_CREDENTIAL_CACHE_MS). */
  private readonly submissionsOf: JobSubmissions;
  private readonly failures: JobFailures;
  private readonly work: Record<JobStage, JobWork>;
  private leaseTimer: NodeJS.Timeout | undefined;
  private readonly stopping = new AbortController();

  /** @param signals tells of jobs other processes made due (PostgreSQL); else they are polled for. */
  constructor(
    private readonly store: Store,
    spool: ContentSpool,
    private readonly processor: ContentProcessor,
    private readonly options: JobRunnerOptions,
    private readonly logger: Logger,
    private readonly signals?: DueSignals,
  ) {
    this.submissionsOf = new JobSubmissions(store, options.credentialCacheMs);
    this.failures = new JobFailures(
      store,
      spool,
      processor,
      options,
      logger,
      this.stopping.signal,
      this.submissionsOf,
    );
    this.work = {
      download: new DownloadJob(store, spool, options, options.objects ?? null),
      scan: new ScanJob(processor, spool, options),
    };
    this.claims = new FairClaims(store, options.stages, options.leaseMs, options.verdictsToClaim);
    this.shortcuts = new ClaimShortcuts(
      options.stages.scan,
      options.leaseMs,
      () => this.stageRunning.scan.size,
    );
    this.submissions = new GroupedCommits(store, {
      durable: true,
      // A spent balance fails its group too: the others are then written alone, as expected.
      onGroupFailed: (error, writes) => {
        if (error instanceof BalanceSpentError) return;
        logger.warn(
          { err: error, writes },
          'a group commit failed; its writes are tried one by one',
        );
      },
    });
    this.acceptances =
      signals === undefined
        ? null
        : new StatementGroups((items) => store.jobs.acceptMany(items), {
            alone: ({ job, received }) => store.jobs.accept(job, received),
            onGroupFailed: (error, writes) =>
              logger.warn(
                { err: error, writes },
                'a group of acceptances failed; they are tried one by one',
              ),
          });
    this.loop = new WorkLoop(
      (woken) => this.tick(woken),
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
    this.shortcuts.enabled = true;
    this.signals?.onDue((stage, accountId) => this.dueElsewhere(stage, accountId));
    this.loop.start();
  }

  /**
   * Accepts an item: takes one credit from its account (BalanceSpentError when the account
   * enforces its balance and has none left) and stores its job with its first trace event, in one
   * transaction, durably (it answers a 202, a promise that must survive power loss); it runs as
   * soon as a slot is free. The caller removes what it spooled when this throws.
   */
  async submit(job: Job, received: string): Promise<void> {
    const stage = stageOf(job);
    if (this.acceptances !== null) {
      // No claim at acceptance here: a claim holds the claim lock (FairClaims), which an
      // acceptance must not wait for while it holds its account's row.
      const accepted = await this.acceptances.get({
        job,
        received: { timestamp: job.creationDate, message: received },
      });
      if (!accepted) throw new BalanceSpentError();
      this.wakeFor(stage, job.accountId);
      return;
    }
    let claimed: Job | null = null;
    try {
      // Submissions arriving together share a transaction and its sync (GroupedCommits).
      await this.submissions.run(async (store) => {
        if (stage === 'scan') claimed = await this.shortcuts.atAcceptance(store, job);
        // The item's credit is taken with its job, or neither: refused when the balance is spent.
        const accepted = await store.jobs.accept(claimed ?? job, {
          timestamp: job.creationDate,
          message: received,
        });
        if (!accepted) throw new BalanceSpentError();
      });
    } finally {
      this.shortcuts.settled(job.id);
    }
    if (claimed !== null) {
      this.launch(stage, claimed);
      return;
    }
    this.wakeFor(stage, job.accountId);
  }

  /** Another process (or this one, heard back) made a job of `accountId` due in `stage`. */
  private dueElsewhere(stage: JobStage, accountId: string): void {
    if (!this.loop.isRunning) return;
    if (stage === 'scan') this.shortcuts.dueElsewhere(accountId);
    this.wakeFor(stage, accountId);
  }

  /**
   * A job of `accountId` became due in `stage`: a round of the due list looks for it, unless none
   * could start it now (every slot of the stage busy, or its account at its cap in the last
   * round): a job ending here starts a round, and one ending elsewhere is seen within a second.
   */
  private wakeFor(stage: JobStage, accountId: string): void {
    if (this.options.stages[stage].slots <= this.stageRunning[stage].size) return;
    if (this.claims.atCap(stage, accountId)) return;
    this.dirty.add(stage);
    this.loop.notify();
  }

  /** Jobs this process is running now. */
  get running(): number {
    return this.active.size;
  }

  /** Takes no new jobs, lets running ones finish for up to `graceMs`, then parks the rest. */
  async stop(graceMs: number): Promise<void> {
    this.shortcuts.enabled = false;
    await this.loop.stop();
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

  /**
   * One round of the due list: claims what the free slots and the accounts' caps allow in each
   * stage (only the stages with news when `woken`: a submission costs no look at the downloads),
   * and says how long the loop may sleep: a minute with every slot taken (a finishing job wakes
   * it), a second while jobs wait for an account's cap (another process's job may end), else until
   * the stage's earliest due job (a retry, or a lease that ends), at most JOB_LOOK_MS.
   */
  private async tick(woken: boolean): Promise<number> {
    const stages = woken ? STAGES.filter((stage) => this.dirty.has(stage)) : STAGES;
    for (const stage of stages) this.dirty.delete(stage);
    for (const stage of stages) {
      const free = this.options.stages[stage].slots - this.stageRunning[stage].size;
      const unclaimedBefore = this.shortcuts.roundStarting();
      const round =
        free <= 0
          ? 'full'
          : await this.claims.claim(stage, free, this.active, (job) => this.launch(stage, job));
      // A round that did not look (every slot busy) leaves the last look's view as it was.
      if (stage === 'scan' && free > 0) {
        this.shortcuts.roundEnded(unclaimedBefore, round, this.claims.soleAccount(stage));
      }
      const now = Date.now();
      if (round === 'full') this.lookAgainAt[stage] = now + 60_000;
      else if (round === 'capped') this.lookAgainAt[stage] = now + 1000;
      else {
        const next = await this.store.jobs.nextDue(stage);
        const lookMs = this.signals === undefined ? JOB_LOOK_MS.unsignalled : JOB_LOOK_MS.signalled;
        this.lookAgainAt[stage] = Math.min(
          now + lookMs,
          next === null ? now + lookMs : Date.parse(next),
        );
      }
    }
    return Math.min(...STAGES.map((stage) => this.lookAgainAt[stage])) - Date.now();
  }

  private launch(stage: JobStage, job: Job): Promise<void> {
    this.stageRunning[stage].add(job.id);
    const run = this.run(job).then((end) => {
      this.active.delete(job.id);
      this.stageRunning[stage].delete(job.id);
      const next = this.handedOff.get(job.id);
      if (next !== undefined) {
        this.handedOff.delete(job.id);
        this.launch(stage, next);
        return;
      }
      // Back in the due list: a job waits again, and a round sees to its retry.
      if (end === 'put back') this.shortcuts.putBack(job);
      // No scan known to wait (the next look, within a second, finds other processes' jobs).
      else if (stage === 'scan' && this.shortcuts.nothingWaiting) return;
      // A slot of its stage is free; a finished download may have moved the job to the scan.
      this.dirty.add(stage);
      if (stage === 'download') this.dirty.add('scan');
      this.loop.notify();
    });
    this.active.set(job.id, run);
    return run;
  }

  /** Never rejects: an outcome that cannot be stored is retried until the store takes it. */
  private async run(job: Job): Promise<JobEnd> {
    try {
      return await this.attempt(job);
    } catch (error) {
      return this.failures.releaseWhenPossible(job, error);
    }
  }

  private async attempt(job: Job): Promise<JobEnd> {
    // Counted when claimed: this job's attempts ended without an outcome, maybe the process.
    if (job.attempts > this.options.maxAttempts) return this.failures.exhausted(job);
    try {
      await this.process(job);
    } catch (error) {
      return this.failures.failed(job, error);
    }
    this.failures.succeeded(job);
    return 'ended';
  }

  private async process(job: Job): Promise<void> {
    const submission = await this.submissionsOf.of(job);
    let outcome: JobOutcome;
    try {
      outcome = await this.work[job.stage ?? 'scan'].run(job, submission);
    } catch (error) {
      // A failed download, or content no engine can decide on (a corrupt image, a document past
      // its caps), is the same on every retry: a finished job with an error, never clean.
      if (!(error instanceof RemoteContentError || error instanceof ContentNotExaminedError)) {
        throw error;
      }
      const message = error.message;
      const creditHeld = job.creditHeld === true;
      outcome = {
        spoolDone: true,
        record: () =>
          this.processor.recordFailure(
            job.id,
            submission,
            message,
            job.creationDate,
            [],
            creditHeld,
          ),
      };
    }
    // While its account alone has jobs waiting, the slot passes to the next in the same write.
    let next: Job | null = null;
    const handOff: SlotHandOff | undefined =
      job.stage === 'scan' && this.shortcuts.mayHandOff(job.accountId)
        ? {
            accountId: job.accountId,
            running: this.active,
            leaseMs: this.options.leaseMs,
            verdicts: this.options.verdictsToClaim?.() ?? null,
            taken: (claimed) => {
              next = claimed;
            },
          }
        : undefined;
    try {
      await outcome.record(handOff);
      if (next !== null) this.handedOff.set(job.id, next);
    } catch (error) {
      throw new RecordingError('the outcome could not be recorded', { cause: error });
    }
    if (outcome.spoolDone) await this.failures.removeSpool(job);
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
