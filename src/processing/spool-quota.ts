import type { JobRepository } from '../store/jobs.js';
import { SpoolQuotaExceededError } from './errors.js';

export interface SpoolQuotaLimits {
  /** Bytes of unfinished async work held in all (ASSAY_SPOOL_MAX_BYTES). */
  totalBytes: number;
  /** Bytes of unfinished async work held for one account (ASSAY_ACCOUNT_SPOOL_MAX_BYTES). */
  accountBytes: number;
}

/** A body without a declared length reserves room in steps of this, not one query per chunk. */
const GROWTH_STEP = 8 * 1024 * 1024;

type Committed = { total: number; account: number };

/**
 * A read of the store's count this young stands in for a new one while the estimate is below
 * half of both quotas: the sum reads every unfinished job, so once per submission it cost
 * O(backlog) each (100 µs with 300 waiting). Near a quota every submission reads it again.
 */
const READ_REUSED_MS = 100;

interface RecentRead {
  at: number;
  value: Committed;
  /** This process's committed bytes (in all, of the account) when the read began. */
  committedTotal: number;
  committedAccount: number;
}

/**
 * Caps the bytes spooled for unfinished async work. Committed jobs are counted in the store (the
 * sum of their `size`), so every process sharing the store counts them alike; uploads still
 * streaming are counted here, as reservations of this process. A submission reserves its declared
 * length before its body is read and grows the reservation if the body turns out longer; the
 * reservation is released once the job is committed (the store counts it from then on) or given up.
 */
export class SpoolQuota {
  private reservedTotal = 0;
  private readonly reservedByAccount = new Map<string, number>();
  /** Counts commits of this process: a store read that raced one is read again. */
  private commits = 0;
  /** Each account's count being read now, and the commits counted when it started. */
  private readonly reading = new Map<string, { commits: number; value: Promise<Committed> }>();
  /** Bytes this process committed, in all and by account (only ever added to). */
  private committedTotal = 0;
  private readonly committedByAccount = new Map<string, number>();
  /** Each account's last read, reused while young and far from the quotas. */
  private readonly recent = new Map<string, RecentRead>();

  constructor(
    private readonly jobs: JobRepository,
    readonly limits: SpoolQuotaLimits,
  ) {}

  /** Reserves `declared` bytes for an account's upload; throws SpoolQuotaExceededError past a quota. */
  async reserve(accountId: string, declared: number): Promise<SpoolReservation> {
    const reservation = new SpoolReservation(this, accountId);
    await reservation.grow(Math.max(0, declared));
    return reservation;
  }

  /**
   * Bytes held for unfinished jobs (committed; uploads still streaming are not counted), in all
   * and by the account holding the most, for the metrics.
   */
  async usage(): Promise<{ heldBytes: number; largestAccountBytes: number }> {
    const { total, largestAccount } = await this.jobs.spoolUsage();
    return { heldBytes: total, largestAccountBytes: largestAccount };
  }

  /**
   * The store's count, read again if a job of this process was committed during the read.
   * Submissions of an account arriving while its count is being read share that read: with 16
   * at once, one sum over the backlog each was the acceptance's costliest statement but one.
   */
  async committed(accountId: string): Promise<Committed> {
    const estimate = this.estimate(accountId);
    if (estimate !== null) return estimate;
    for (;;) {
      let read = this.reading.get(accountId);
      if (read === undefined) {
        const at = Date.now();
        const committedTotal = this.committedTotal;
        const committedAccount = this.committedByAccount.get(accountId) ?? 0;
        const started = { commits: this.commits, value: this.jobs.spooledBytes(accountId) };
        started.value.then(
          (value) => {
            this.recent.set(accountId, { at, value, committedTotal, committedAccount });
          },
          () => {},
        );
        this.reading.set(accountId, started);
        const done = () => {
          if (this.reading.get(accountId) === started) this.reading.delete(accountId);
        };
        started.value.then(done, done);
        read = started;
      }
      const committed = await read.value;
      if (read.commits === this.commits) return committed;
    }
  }

  /** Sets an account's reservation to `bytes` if it fits beside everything else; else throws. */
  take(accountId: string, held: number, wanted: number, committed: Committed): void {
    const others = this.reservedTotal - held;
    const accountOthers = (this.reservedByAccount.get(accountId) ?? 0) - held;
    // The account's own quota first: an account over its share is told so (429), not that the
    // service is full (507).
    if (committed.account + accountOthers + wanted > this.limits.accountBytes) {
      throw new SpoolQuotaExceededError('account', this.limits.accountBytes);
    }
    if (committed.total + others + wanted > this.limits.totalBytes) {
      throw new SpoolQuotaExceededError('total', this.limits.totalBytes);
    }
    this.adjust(accountId, wanted - held);
  }

  /** Headroom for growth: what could still be taken without passing either quota. */
  room(accountId: string, held: number, committed: Committed): number {
    const others = this.reservedTotal - held;
    const accountOthers = (this.reservedByAccount.get(accountId) ?? 0) - held;
    return Math.min(
      this.limits.accountBytes - committed.account - accountOthers,
      this.limits.totalBytes - committed.total - others,
    );
  }

  release(accountId: string, held: number, committedNow: boolean): void {
    if (committedNow) {
      this.commits += 1;
      this.committedTotal += held;
      this.committedByAccount.set(accountId, (this.committedByAccount.get(accountId) ?? 0) + held);
    }
    this.adjust(accountId, -held);
  }

  /**
   * A recent read plus what this process committed since (never less than the store's count but
   * for other processes' last 100 ms), if it is below half of both quotas; else null.
   */
  private estimate(accountId: string): Committed | null {
    const read = this.recent.get(accountId);
    if (read === undefined) return null;
    if (Date.now() - read.at > READ_REUSED_MS) {
      this.recent.delete(accountId);
      return null;
    }
    const estimate = {
      total: read.value.total + this.committedTotal - read.committedTotal,
      account:
        read.value.account + (this.committedByAccount.get(accountId) ?? 0) - read.committedAccount,
    };
    const far =
      estimate.total < this.limits.totalBytes / 2 &&
      estimate.account < this.limits.accountBytes / 2;
    return far ? estimate : null;
  }

  private adjust(accountId: string, delta: number): void {
    this.reservedTotal += delta;
    const next = (this.reservedByAccount.get(accountId) ?? 0) + delta;
    if (next <= 0) this.reservedByAccount.delete(accountId);
    else this.reservedByAccount.set(accountId, next);
  }
}

/** One upload's share of the quota, from its declared length until its job is committed. */
export class SpoolReservation {
  private held = 0;
  private released = false;

  constructor(
    private readonly quota: SpoolQuota,
    private readonly accountId: string,
  ) {}

  /**
   * Makes sure `bytes` are reserved; throws SpoolQuotaExceededError if they do not fit. `headroom`:
   * reserve some room for the chunks to come too (a body past its declared length, or with none),
   * so such a body costs a store query per step, not per chunk.
   */
  async grow(bytes: number, headroom = false): Promise<void> {
    if (bytes <= this.held || this.released) return;
    const committed = await this.quota.committed(this.accountId);
    if (this.released) return;
    this.quota.take(this.accountId, this.held, bytes, committed);
    this.held = bytes;
    if (!headroom) return;
    const extra = Math.min(
      GROWTH_STEP,
      this.quota.room(this.accountId, this.held, committed) - this.held,
    );
    if (extra > 0) {
      this.quota.take(this.accountId, this.held, this.held + extra, committed);
      this.held += extra;
    }
  }

  /** Counts the content on its way to the spool, refusing it once it passes the quota. */
  async *count(source: AsyncIterable<Buffer>): AsyncGenerator<Buffer> {
    let size = 0;
    for await (const chunk of source) {
      size += chunk.length;
      await this.grow(size, true);
      yield chunk;
    }
  }

  /** `committed`: the job is in the store, which counts its bytes from now on. */
  release(committed: boolean): void {
    if (this.released) return;
    this.released = true;
    this.quota.release(this.accountId, this.held, committed);
    this.held = 0;
  }
}
