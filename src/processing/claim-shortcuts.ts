import type { Job } from '../domain/records.js';
import type { Store } from '../store/store.js';
import type { ClaimRound, StageLimits } from './fair-claims.js';

/** A hand-off goes on this long after the round that found one account alone, then a round looks again. */
const SOLE_ACCOUNT_TRUSTED_MS = 1000;

/**
 * Claims of uploads without a round of the due list, for the due-list runner, where a
 * round (a transaction, due-list seeks, cap counts, a commit) was most of what an async item cost
 * beyond a sync one (issue 28). Each stands for the round that would have claimed the same job:
 *
 * - **At acceptance** (SQLite only: on PostgreSQL an acceptance's transaction must not wait for
 *   the claim lock). While nothing waits (the scan stage's last round found no due job, and every
 *   upload accepted since was claimed this way), an upload that finds a free slot and its account
 *   under its cap (counted in the store, so across processes) is written already claimed, with
 *   its lease and its first attempt, in its acceptance's transaction, and runs once committed.
 * - **Hand-off at the end of a job.** While one account alone has due jobs (the last round found no
 *   other, less than a second ago, and every upload left waiting since is that account's), a job
 *   of that account that ends hands its slot to the account's oldest due job, claimed with the
 *   commit that records the result (SlotHandOff, result-recorder.ts): the account's count toward
 *   its cap does not change.
 *
 * Accounts still take turns: any other account's waiting upload stops both until a round has
 * looked. Jobs left due by other processes are found by the next round: signalled on PostgreSQL
 * (they count as waiting, of their account), within a second on SQLite. A
 * process that dies before running a job claimed so leaves a leased row, given back when its
 * lease ends, as for any claim.
 */
export class ClaimShortcuts {
  private open = false;
  /** Uploads accepted without a claim: each one may be waiting in the due list. */
  private unclaimed = 0;
  /**
   * Accounts with such uploads not yet seen by a round: each with its latest one's number (as
   * counted in `unclaimed`). One entry per account, however many signals arrive between rounds.
   */
  private readonly unseen = new Map<string, number>();
  /** `unclaimed` when the last round that found nothing due began; -1: the last round left jobs. */
  private drainedAt = -1;
  /** The only account with due jobs at the last round's end, and when; null: none or several. */
  private sole: { accountId: string; at: number } | null = null;
  /** Jobs claimed at acceptance in a transaction not committed yet: they hold a slot already. */
  private readonly reserved = new Set<string>();

  constructor(
    private readonly limits: StageLimits,
    private readonly leaseMs: number,
    /** Scan jobs running in this process. */
    private readonly running: () => number,
  ) {}

  /** On while the runner's loop runs. */
  set enabled(value: boolean) {
    this.open = value;
  }

  /** A scan round begins: what it returns goes to `roundEnded`. */
  roundStarting(): number {
    return this.unclaimed;
  }

  /**
   * A scan round ended: `round` is how; `soleAccount`, the only account left with due jobs, if
   * the round saw just one.
   */
  roundEnded(startedAt: number, round: ClaimRound, soleAccount: string | null): void {
    this.drainedAt = round === 'drained' ? startedAt : -1;
    for (const [accountId, seq] of this.unseen) {
      if (seq <= startedAt) this.unseen.delete(accountId);
    }
    this.sole =
      round !== 'drained' && soleAccount !== null
        ? { accountId: soleAccount, at: Date.now() }
        : null;
  }

  /** No job is known to wait in the due list: a finished job need not start a round. */
  get nothingWaiting(): boolean {
    return this.open && this.drainedAt === this.unclaimed;
  }

  /**
   * In the acceptance's transaction, before the job is written: the job claimed (to be written
   * so and run once committed), or null (written pending, for a round to claim). A group retried
   * one by one decides again.
   */
  async atAcceptance(store: Store, job: Job): Promise<Job | null> {
    this.reserved.delete(job.id);
    // Off (no due-list runner here, or stopping): no round will look, so nothing is tracked.
    if (!this.open) return null;
    const started = this.running() + this.reserved.size;
    if (!this.nothingWaiting || started >= this.limits.slots) return this.pending(job);
    const now = Date.now();
    const held = await store.jobs.inFlightOfAccount(
      'scan',
      job.accountId,
      new Date(now).toISOString(),
    );
    if (held >= this.limits.perAccount) return this.pending(job);
    this.reserved.add(job.id);
    return {
      ...job,
      state: 'processing',
      attempts: job.attempts + 1,
      runAfter: new Date(now + this.leaseMs).toISOString(),
      lastError: null,
      stage: 'scan',
      creditHeld: true,
    };
  }

  /** The acceptance committed or failed: its job no longer holds a reserved slot. */
  settled(id: string): void {
    this.reserved.delete(id);
  }

  /** Whether a job of `accountId` that ends now may hand its slot on (see the class). */
  mayHandOff(accountId: string): boolean {
    const sole = this.sole;
    if (!this.open || sole === null || sole.accountId !== accountId) return false;
    if (Date.now() - sole.at > SOLE_ACCOUNT_TRUSTED_MS) return false;
    return this.unseen.size === 0 || (this.unseen.size === 1 && this.unseen.has(accountId));
  }

  /**
   * Another process made a job of `accountId` due (PostgreSQL's signal): it waits like an upload
   * left pending here, so a finished job starts a round, and another account's stops hand-offs.
   */
  dueElsewhere(accountId: string): void {
    if (this.open) this.pending({ accountId });
  }

  /** A job that ran here is back in the due list (a retry): it waits like an upload left pending. */
  putBack(job: Job): void {
    if (this.open) this.pending(job);
  }

  private pending(job: Pick<Job, 'accountId'>): null {
    this.unclaimed += 1;
    this.unseen.set(job.accountId, this.unclaimed);
    return null;
  }
}
