import type { Logger } from 'pino';
import type { Job, JobStage } from '../domain/records.js';
import { GroupedLookups } from '../store/grouped-lookups.js';
import type { Store } from '../store/store.js';
import type { JobRunnerOptions } from './job-work.js';
import type { WorkDelivery } from './work-delivery.js';

/** A claim of delivered jobs failed: it may have committed, holding them until `leaseUntil`. */
class ClaimFailedError extends Error {
  constructor(
    readonly leaseUntil: string,
    override readonly cause: unknown,
  ) {
    super('claiming delivered jobs failed', { cause });
  }
}

/** Jobs whose worker died are looked for at least this often after a look. */
const LEASE_SWEEP_MIN_MS = 100;

const STAGES = ['scan', 'download'] as const;

/**
 * The job runner's side of a WorkDelivery (pg-boss on PostgreSQL): each delivery names a job,
 * claimed in the store (the messages of one fetch in one statement) and handed to `launch`; one
 * that cannot be claimed now (finished, not due yet, held by a live worker, or in another stage)
 * is announced again for when it can be, a finished one is not. Jobs whose worker died (their
 * lease ended unrenewed) are announced again.
 */
export class DeliveredJobs {
  private readonly claims: Record<JobStage, GroupedLookups<string, Job | null>>;
  /** Set when stop begins: deliveries are no longer claimed, or launched once claimed. */
  private closing = false;
  /** Claims in flight (see stop). */
  private readonly claiming = new Set<Promise<unknown>>();
  private sweepTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly store: Store,
    private readonly delivery: WorkDelivery,
    private readonly options: Pick<JobRunnerOptions, 'stages' | 'leaseMs'>,
    private readonly logger: Logger,
    /** Runs a claimed job: its run, which never rejects. */
    private readonly launch: (stage: JobStage, job: Job) => Promise<void>,
  ) {
    const claimsOf = (stage: JobStage) =>
      new GroupedLookups<string, Job | null>(async (ids) => {
        const now = Date.now();
        const leaseUntil = new Date(now + options.leaseMs).toISOString();
        try {
          const claimed = await store.jobs.claimMany(
            ids,
            new Date(now).toISOString(),
            leaseUntil,
            stage,
          );
          return ids.map((id) => claimed.get(id) ?? null);
        } catch (error) {
          throw new ClaimFailedError(leaseUntil, error);
        }
      });
    this.claims = { scan: claimsOf('scan'), download: claimsOf('download') };
  }

  async start(): Promise<void> {
    // Jobs written without a dispatch (migrate-store, an older version) are announced once.
    const announced = await this.store.jobs.redispatch({ unheldAt: new Date().toISOString() });
    if (announced > 0) this.logger.info({ jobs: announced }, 'jobs waiting were dispatched');
    for (const stage of STAGES) {
      const { slots, perAccount } = this.options.stages[stage];
      await this.delivery.deliver(stage, { slots, perAccount }, (id) => this.delivered(stage, id));
    }
    await this.sweepEndedLeases();
  }

  /**
   * Takes no more deliveries. Claims in flight end first: each job is then launched (the runner
   * waits for it) or put back, never left running past the store's close.
   */
  async stop(): Promise<void> {
    this.closing = true;
    clearTimeout(this.sweepTimer);
    await Promise.all(STAGES.map((stage) => this.delivery.stopDelivering(stage)));
    await Promise.allSettled([...this.claiming]);
  }

  /** A delivered job: claimed and run to its end. */
  private async delivered(stage: JobStage, id: string): Promise<void> {
    if (this.closing) throw new Error('stopping: delivered again later');
    const claimed = this.claim(stage, id);
    this.claiming.add(claimed);
    let launched: { run: Promise<void> } | undefined;
    try {
      launched = await claimed;
    } finally {
      this.claiming.delete(claimed);
    }
    await launched?.run;
  }

  /** Claims a delivered job and launches it: its run, or undefined when it does not run here. */
  private async claim(stage: JobStage, id: string): Promise<{ run: Promise<void> } | undefined> {
    let job: Job | null;
    try {
      job = await this.claims[stage].get(id);
    } catch (caught) {
      if (!(caught instanceof ClaimFailedError)) throw caught;
      const { leaseUntil, cause: error } = caught;
      // A claim can commit and lose its answer with its connection: this process would then hold
      // a job it does not run until the lease ends (a minute). Put back at once if so (issue 25).
      const released = await this.store.jobs.release(id, new Date().toISOString(), {
        refund: true,
        leasedUntil: leaseUntil,
      });
      this.logger.warn(
        { err: error, job: id, released },
        released ? 'a claim lost its answer; the job was put back' : 'a claim failed',
      );
      // Released: announced again with it, so this delivery ends; else pg-boss delivers it again.
      if (released) return undefined;
      throw error;
    }
    if (job === null) {
      await this.store.jobs.redispatch({ id });
      return undefined;
    }
    if (this.closing) {
      // Claimed as the process stops: put back at once (the attempt not counted) for the next
      // process, rather than run while the engines and the store close (its lease would hold it).
      await this.store.jobs.release(job.id, new Date().toISOString(), { refund: true });
      return undefined;
    }
    return { run: this.launch(stage, job) };
  }

  /**
   * Jobs whose worker died (their lease ended unrenewed) are announced again. The next look is when
   * the earliest lease running now ends (at once if it ended), or one lease from now when none
   * runs (a job claimed later ends no sooner), so an idle deployment's database is left alone; a
   * failed look is tried again in a second.
   */
  private async sweepEndedLeases(): Promise<void> {
    if (this.closing) return;
    let waitMs = 1000;
    try {
      const now = Date.now();
      const { announced, nextEnd } = await this.store.jobs.announceEndedLeases(
        new Date(now).toISOString(),
      );
      if (announced > 0)
        this.logger.warn({ jobs: announced }, 'jobs whose lease ended were dispatched');
      const next = nextEnd === null ? now + this.options.leaseMs : Date.parse(nextEnd);
      waitMs = Math.min(next, now + this.options.leaseMs) - Date.now();
    } catch (error) {
      this.logger.error({ err: error }, 'could not look for jobs whose lease ended');
    }
    if (this.closing) return; // stopped during the look
    clearTimeout(this.sweepTimer);
    this.sweepTimer = setTimeout(
      () => void this.sweepEndedLeases(),
      Math.max(LEASE_SWEEP_MIN_MS, waitMs),
    );
    this.sweepTimer.unref();
  }
}
