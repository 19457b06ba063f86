import type { Job, JobStage } from '../domain/records.js';
import type { VerdictsToClaim } from '../store/claimed-verdicts.js';
import type { RunningJobs } from '../store/job-claims.js';
import type { Store } from '../store/store.js';

/** A stage's slots in this process, and how many of them one account may hold in all processes. */
export interface StageLimits {
  slots: number;
  perAccount: number;
}

/** How a round of claims ended (FairClaims.claim). */
export type ClaimRound = 'full' | 'capped' | 'drained';

/**
 * Claims due jobs of one stage fairly: accounts with due jobs take turns (round-robin from the
 * account served last), each up to its cap. The caps are counted in the store (processing jobs
 * with a live lease; for downloads also the fetches already downloaded and not yet scanned), so
 * they hold across every process sharing it: a round's transaction first waits for any other
 * process's round of the stage (SQLite's write lock; an advisory lock on PostgreSQL).
 */
export class FairClaims {
  /** The account served last in each stage: claims go round-robin from the next one. */
  private readonly lastAccount: Record<JobStage, string> = { download: '', scan: '' };

  constructor(
    private readonly store: Store,
    private readonly limits: Record<JobStage, StageLimits>,
    private readonly leaseMs: number,
    /** Scans are claimed with their content's earlier verdicts (VerdictCache.toClaim). */
    private readonly verdictsToClaim: () => VerdictsToClaim | null = () => null,
  ) {}

  /** Accounts found at their cap in each stage's last round: their new jobs wait for a slot. */
  private readonly capped: Record<JobStage, Set<string>> = { download: new Set(), scan: new Set() };
  /** The only account with due jobs when each stage's last round ended; null: none or several. */
  private readonly sole: Record<JobStage, string | null> = { download: null, scan: null };

  /**
   * Claims up to `free` jobs of `stage`, one per account in turn (the account's oldest due job),
   * skipping accounts at their cap and jobs `running` here, and hands each to `start`. An account
   * that is the only one with due jobs takes what its cap and the free slots allow at once. Says
   * how the round ended: every slot taken (`full`), due jobs left because their accounts are at
   * their cap (`capped`), or no due job left (`drained`).
   */
  async claim(
    stage: JobStage,
    free: number,
    running: RunningJobs,
    start: (job: Job) => void,
  ): Promise<ClaimRound> {
    // One transaction per round: its reads and claims commit once, not once per job claimed, and
    // no other process's claim comes between a read and the claim it decides.
    const claimed: Job[] = [];
    const round = await this.store.transaction((store) =>
      this.claimIn(store, stage, free, running, claimed),
    );
    for (const job of claimed) start(job);
    return round;
  }

  private async claimIn(
    store: Store,
    stage: JobStage,
    free: number,
    running: RunningJobs,
    started: Job[],
  ): Promise<ClaimRound> {
    await store.jobs.lockClaims(stage);
    const now = new Date().toISOString();
    const leaseUntil = new Date(Date.now() + this.leaseMs).toISOString();
    const { perAccount } = this.limits[stage];
    const verdicts = stage === 'scan' ? this.verdictsToClaim() : null;
    const held = await this.heldByAccount(store, stage, now);
    const capped = this.capped[stage];
    capped.clear();
    this.sole[stage] = null;
    // Accounts passed over since the last claim: meeting one again means a full turn found nothing.
    const passed = new Set<string>();
    while (free > 0) {
      const last = this.lastAccount[stage];
      let next = await store.jobs.nextDueAfter(stage, last, now);
      let alone = false;
      if (next === null && last !== '') {
        next = await store.jobs.nextDueAfter(stage, '', now);
        // The walk wrapped around to the account it served last: no other account has due jobs.
        alone = next?.accountId === last;
      }
      if (next === null) return 'drained';
      this.lastAccount[stage] = next.accountId;
      this.sole[stage] = alone ? next.accountId : null;
      if (passed.has(next.accountId)) return 'capped';
      const count = held.get(next.accountId) ?? 0;
      if (count >= perAccount) {
        capped.add(next.accountId);
        // No other account has due jobs: a full turn would find nothing.
        if (alone) return 'capped';
      }
      const room = Math.min(free, perAccount - count);
      let claimed: Job[] = [];
      if (room > 0 && alone) {
        claimed = await store.jobs.claimDue(
          stage,
          next.accountId,
          now,
          leaseUntil,
          room,
          running,
          verdicts,
        );
      } else if (room > 0 && !running.has(next.id)) {
        const job = await store.jobs.claim(next.id, now, leaseUntil, stage, verdicts);
        if (job !== null) claimed = [job];
      }
      if (claimed.length === 0) {
        passed.add(next.accountId);
        continue;
      }
      passed.clear();
      held.set(next.accountId, count + claimed.length);
      free -= claimed.length;
      started.push(...claimed);
      if (alone && count + claimed.length >= perAccount) {
        capped.add(next.accountId);
        if (free > 0) return 'capped';
      }
    }
    return 'full';
  }

  /** The only account that had due jobs of `stage` when its last round ended, if it saw one. */
  soleAccount(stage: JobStage): string | null {
    return this.sole[stage];
  }

  /**
   * Whether `accountId` was at its cap in `stage` at the last round: a job it submits now cannot
   * be claimed until one of its jobs ends (which starts a round) or the next look.
   */
  atCap(stage: JobStage, accountId: string): boolean {
    return this.capped[stage].has(accountId);
  }

  /** Per account, what counts toward its cap in `stage`, in every process sharing the store. */
  private async heldByAccount(
    store: Store,
    stage: JobStage,
    now: string,
  ): Promise<Map<string, number>> {
    const held = await store.jobs.inFlightByAccount(stage, now);
    if (stage === 'scan') return held;
    // Downloaded fetches waiting for their scan still hold spool space: the download cap counts them.
    for (const [account, count] of await store.jobs.downloadedByAccount()) {
      held.set(account, (held.get(account) ?? 0) + count);
    }
    return held;
  }
}
