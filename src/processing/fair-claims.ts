import type { Job, JobStage } from '../domain/records.js';
import type { Store } from '../store/store.js';

/** A stage's slots in this process, and how many of them one account may hold in all processes. */
export interface StageLimits {
  slots: number;
  perAccount: number;
}

/**
 * Claims due jobs of one stage fairly: accounts with due jobs take turns (round-robin from the
 * account served last), each up to its cap. The caps are counted in the store (processing jobs
 * with a live lease; for downloads also the fetches already downloaded and not yet scanned), so
 * they hold across every process sharing it; on pg-boss, a queue per stage with the account as
 * the job's `group` and the cap as `groupConcurrency`.
 */
export class FairClaims {
  /** The account served last in each stage: claims go round-robin from the next one. */
  private readonly lastAccount: Record<JobStage, string> = { download: '', scan: '' };

  constructor(
    private readonly store: Store,
    private readonly limits: Record<JobStage, StageLimits>,
    private readonly leaseMs: number,
  ) {}

  /**
   * Claims up to `free` jobs of `stage`, one per account in turn (the account's oldest due job),
   * skipping accounts at their cap and jobs `running` here, and hands each to `start`. True when
   * due jobs were left because their accounts are at their cap.
   */
  async claim(
    stage: JobStage,
    free: number,
    running: (id: string) => boolean,
    start: (job: Job) => void,
  ): Promise<boolean> {
    const now = new Date().toISOString();
    const leaseUntil = new Date(Date.now() + this.leaseMs).toISOString();
    const { perAccount } = this.limits[stage];
    const held = await this.heldByAccount(stage, now);
    // Accounts passed over since the last claim: meeting one again means a full turn found nothing.
    const passed = new Set<string>();
    while (free > 0) {
      const last = this.lastAccount[stage];
      const next =
        (await this.store.jobs.nextDueAfter(stage, last, now)) ??
        (last === '' ? null : await this.store.jobs.nextDueAfter(stage, '', now));
      if (next === null) return false;
      this.lastAccount[stage] = next.accountId;
      if (passed.has(next.accountId)) return true;
      const count = held.get(next.accountId) ?? 0;
      const job =
        count >= perAccount || running(next.id)
          ? null
          : await this.store.jobs.claim(next.id, now, leaseUntil);
      if (job === null) {
        passed.add(next.accountId);
        continue;
      }
      passed.clear();
      held.set(job.accountId, count + 1);
      free -= 1;
      start(job);
    }
    return false;
  }

  /** Per account, what counts toward its cap in `stage`, in every process sharing the store. */
  private async heldByAccount(stage: JobStage, now: string): Promise<Map<string, number>> {
    const held = await this.store.jobs.inFlightByAccount(stage, now);
    if (stage === 'scan') return held;
    // Downloaded fetches waiting for their scan still hold spool space: the download cap counts them.
    for (const [account, count] of await this.store.jobs.downloadedByAccount()) {
      held.set(account, (held.get(account) ?? 0) + count);
    }
    return held;
  }
}
