import { SpooledContentError, SpoolUnavailableError } from '../domain/failures.js';

/** How long a check's outcome answers later ones: readiness is open to anyone and polled often. */
const REUSE_MS = 1000;
/** A check that takes longer has failed (a hung mount, a silent server). */
const CHECK_TIMEOUT_MS = 5000;

/** What a backend does to see whether it answers. */
export interface SpoolChecks {
  /** Cheap, for every readiness poll: the directory is there and writable; the bucket answers. */
  quick(signal: AbortSignal): Promise<void>;
  /** After an operation failed: what the work does (an empty file or object written, removed). */
  thorough(signal: AbortSignal): Promise<void>;
}

interface Check {
  startedAt: number;
  settledAt: number | null;
  outcome: Promise<void>;
}

/**
 * Whether a spool answers, for readiness and for telling an outage from one item's missing
 * content. An operation that found the spool out is remembered until a thorough check (a real
 * write) works, so a fault that only writes reveal keeps readiness down; otherwise a quick check
 * runs. One check runs at a time: its outcome answers everyone for REUSE_MS after it ends, except
 * a caller that needs a check started after a failure it saw. A check that hangs fails after
 * CHECK_TIMEOUT_MS, and none starts again until it ends (a hung mount holds one thread, not all).
 */
export class SpoolHealth {
  private failure: unknown = null;
  private current: Check | null = null;
  private running = false;

  private readonly reuseMs: number;
  private readonly timeoutMs: number;

  constructor(
    private readonly checks: SpoolChecks,
    options: { reuseMs?: number; timeoutMs?: number } = {},
  ) {
    this.reuseMs = options.reuseMs ?? REUSE_MS;
    this.timeoutMs = options.timeoutMs ?? CHECK_TIMEOUT_MS;
  }

  /** An operation found the spool out: checks write until one works. */
  noteFailure(error: unknown): void {
    this.failure = error;
    // An outcome from before it no longer answers readiness.
    if (this.current !== null && this.current.settledAt !== null) this.current = null;
  }

  /**
   * What a failed read means: the item's (SpooledContentError; `missing`: its content is not
   * there) when the spool answers a check started after the failure (`failedAt`,
   * performance.now()), else an outage, noted for readiness. `foundNow` (for `missing`): whether
   * the content is there after all; when it is, the spool came back between the failure and the
   * check, and the failure was the outage's.
   */
  async readFailure(
    error: unknown,
    failedAt: number,
    missing: boolean,
    foundNow?: () => Promise<boolean>,
  ): Promise<Error> {
    try {
      await this.check(failedAt);
    } catch {
      this.noteFailure(error);
      return new SpoolUnavailableError('reading', error);
    }
    if (missing && foundNow !== undefined && (await foundNow().catch(() => false))) {
      return new SpoolUnavailableError('reading', error);
    }
    return new SpooledContentError(missing, error);
  }

  /** An operation wrote to the spool: it answers. */
  noteSuccess(): void {
    this.failure = null;
  }

  /**
   * Resolves when the spool answers, else rejects with a SpoolUnavailableError. `since`
   * (performance.now()): only a check started then or later will do.
   */
  check(since = 0): Promise<void> {
    const current = this.current;
    if (current !== null) {
      const fresh =
        current.settledAt === null || performance.now() - current.settledAt < this.reuseMs;
      if (current.startedAt >= since && fresh) return current.outcome;
      // One that started too early is still under way: the next starts once it ends.
      if (current.settledAt === null) {
        const next = () => this.check(since);
        return current.outcome.then(next, next);
      }
    }
    if (this.running) {
      return Promise.reject(
        new SpoolUnavailableError('checking', new Error('the last check has not ended')),
      );
    }
    return this.start();
  }

  private start(): Promise<void> {
    const noted = this.failure;
    const thorough = noted !== null;
    const signal = AbortSignal.timeout(this.timeoutMs);
    const check: Check = { startedAt: performance.now(), settledAt: null, outcome: null as never };
    this.running = true;
    const work = (thorough ? this.checks.thorough(signal) : this.checks.quick(signal)).finally(
      () => {
        this.running = false;
      },
    );
    const timedOut = new Promise<never>((_resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`no answer within ${this.timeoutMs} ms`)),
        this.timeoutMs,
      );
      timer.unref();
      void work.then(
        () => clearTimeout(timer),
        () => clearTimeout(timer),
      );
    });
    check.outcome = Promise.race([work, timedOut]).then(
      () => {
        check.settledAt = performance.now();
        // Unless another failure was noted while it ran.
        if (thorough && this.failure === noted) this.failure = null;
      },
      (error: unknown) => {
        check.settledAt = performance.now();
        throw error instanceof SpoolUnavailableError
          ? error
          : new SpoolUnavailableError('checking', error);
      },
    );
    // Readiness may not ask again: an unobserved rejection is not a crash.
    check.outcome.catch(() => {});
    this.current = check;
    return check.outcome;
  }
}
