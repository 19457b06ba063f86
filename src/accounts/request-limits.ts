import type { Logger } from 'pino';
import type { KeyRateLimit } from '../domain/records.js';
import { PeriodicTask } from '../periodic-task.js';
import type { Store } from '../store/store.js';
import { type RateDecision, TokenBuckets } from './rate-limiter.js';

/**
 * The request limits authentication applies: each key's rate limit, and failed authentications
 * per client address. One process alone on its store keeps them in memory; processes sharing a
 * store (PostgreSQL, or `--processes`) share them through it.
 */
export interface RequestLimits {
  /** Takes one request from the key's bucket. */
  takeKeyRequest(keyId: string, limit: KeyRateLimit): Promise<RateDecision>;
  /** Whether `client` may try to authenticate (its failures are under the limit); takes nothing. */
  failuresAllowed(client: string): Promise<RateDecision>;
  /** Counts one failed authentication of `client`. */
  recordFailure(client: string): Promise<void>;
  start(): Promise<void>;
  stop(): Promise<void>;
}

/** In memory: exact, free, and right only for a process alone on its store. */
export class LocalRequestLimits implements RequestLimits {
  private readonly keys = new TokenBuckets();
  private readonly failures = new TokenBuckets();

  constructor(private readonly failureLimit: KeyRateLimit) {}

  async takeKeyRequest(keyId: string, limit: KeyRateLimit): Promise<RateDecision> {
    return this.keys.take(keyId, limit);
  }

  async failuresAllowed(client: string): Promise<RateDecision> {
    return this.failures.peek(client, this.failureLimit);
  }

  async recordFailure(client: string): Promise<void> {
    this.failures.take(client, this.failureLimit);
  }

  async start(): Promise<void> {}
  async stop(): Promise<void> {}
}

/** How often a process reads which addresses are over the failure limit in any process. */
const BLOCKED_REFRESH_MS = 500;
/**
 * The addresses over the limit are read only while requests ask about them: a process that was
 * asked nothing for this long (idle, or a worker) reads nothing, and its first request after the
 * pause waits for a fresh read.
 */
const READ_WHILE_ASKED_MS = 10_000;
/** Leased tokens not used within this are dropped (they were taken from the shared bucket). */
const LEASE_MS = 1000;
const KEY_PREFIX = 'key:';
const FAILURE_PREFIX = 'fail:';

interface LocalLease {
  tokens: number;
  until: number;
  /** The shared bucket's tokens after the lease, for `x-ratelimit-remaining`. */
  left: number;
  /** The limit leased under: a changed limit takes effect at the next request. */
  limit: KeyRateLimit;
}

/**
 * Token buckets in the store, shared by every process on it. A process leases a few tokens at a
 * time (50 ms of the rate, at most a quarter of the burst), so a busy key costs one store write
 * per few requests, and a key limited to R/s gets about R/s across all processes (leased tokens a
 * process does not use within a second are lost: a little under R, never over). Failed
 * authentications are recorded in the store as they happen; which addresses are over the limit is
 * read every 500 ms, so checking an address costs nothing.
 */
export class SharedRequestLimits implements RequestLimits {
  private readonly leases = new Map<string, LocalLease>();
  /** Addresses over the failure limit, with when they may try again (ms since the epoch). */
  private blocked = new Map<string, number>();
  private readonly refresh: PeriodicTask;
  /** When a request last asked whether its address may fail again (ms since the epoch). */
  private askedAt = 0;
  /** When `blocked` was last read from the store, and a read under way (shared). */
  private readAt = 0;
  private reading: Promise<void> | null = null;

  constructor(
    private readonly store: Store,
    private readonly failureLimit: KeyRateLimit,
    logger: Logger,
    private readonly clock: () => number = Date.now,
  ) {
    this.refresh = new PeriodicTask(
      async () => {
        const now = this.clock();
        if (now - this.askedAt > READ_WHILE_ASKED_MS) return;
        await this.readBlocked();
        // Leases past their time are dead weight.
        for (const [name, lease] of this.leases) if (lease.until <= now) this.leases.delete(name);
        // About once a minute in one of the processes: full buckets are forgotten.
        if (Math.random() < BLOCKED_REFRESH_MS / 60_000) await store.rateBuckets.deleteFull(now);
      },
      BLOCKED_REFRESH_MS,
      logger,
      'reading the shared failed-authentication limits',
    );
  }

  async takeKeyRequest(keyId: string, limit: KeyRateLimit): Promise<RateDecision> {
    if (limit.rate === 0) {
      return { allowed: true, limit: limit.burst, remaining: limit.burst, retryAfterSeconds: 0 };
    }
    const name = `${KEY_PREFIX}${keyId}`;
    const now = this.clock();
    const held = this.leases.get(name);
    if (
      held !== undefined &&
      held.until > now &&
      held.tokens >= 1 &&
      held.limit.rate === limit.rate &&
      held.limit.burst === limit.burst
    ) {
      held.tokens -= 1;
      return allowed(limit, held.left + held.tokens);
    }
    const want = Math.max(1, Math.min(Math.ceil(limit.rate / 20), Math.floor(limit.burst / 4)));
    const lease = await this.store.rateBuckets.lease(name, limit, want, now);
    if (lease.granted === 0) {
      this.leases.delete(name);
      return refused(limit, lease.left);
    }
    this.leases.set(name, {
      tokens: lease.granted - 1,
      until: now + LEASE_MS,
      left: lease.left,
      limit,
    });
    return allowed(limit, lease.left + lease.granted - 1);
  }

  async failuresAllowed(client: string): Promise<RateDecision> {
    this.askedAt = this.clock();
    // Not read for a while (the refresh skips its reads while nobody asks): read before answering.
    // A store that does not answer leaves what was read last: the request goes on to its own checks.
    if (this.askedAt - this.readAt > 2 * BLOCKED_REFRESH_MS) {
      await this.readBlocked().catch(() => {});
    }
    const until = this.blocked.get(client);
    const now = this.clock();
    if (until === undefined || until <= now)
      return allowed(this.failureLimit, this.failureLimit.burst);
    return {
      allowed: false,
      limit: this.failureLimit.burst,
      remaining: 0,
      retryAfterSeconds: Math.max(1, Math.ceil((until - now) / 1000)),
    };
  }

  /** Reads which addresses are over the failure limit; callers arriving meanwhile share the read. */
  private readBlocked(): Promise<void> {
    this.reading ??= (async () => {
      try {
        const now = this.clock();
        const empty = await this.store.rateBuckets.emptyUnder(FAILURE_PREFIX, now);
        this.blocked = new Map(
          empty.map(({ name, until }) => [name.slice(FAILURE_PREFIX.length), until]),
        );
        this.readAt = now;
      } finally {
        this.reading = null;
      }
    })();
    return this.reading;
  }

  async recordFailure(client: string): Promise<void> {
    if (this.failureLimit.rate === 0) return;
    const now = this.clock();
    const lease = await this.store.rateBuckets.lease(
      `${FAILURE_PREFIX}${client}`,
      this.failureLimit,
      1,
      now,
    );
    // Over the limit here: refused at once in this process, in the others at their next read.
    if (lease.granted === 0 || lease.left < 1) {
      this.blocked.set(client, now + ((1 - lease.left) / this.failureLimit.rate) * 1000);
    }
  }

  start(): Promise<void> {
    return this.refresh.start();
  }

  stop(): Promise<void> {
    return this.refresh.stop();
  }
}

function allowed(limit: KeyRateLimit, remaining: number): RateDecision {
  return {
    allowed: true,
    limit: limit.burst,
    remaining: Math.max(0, Math.floor(remaining)),
    retryAfterSeconds: 0,
  };
}

function refused(limit: KeyRateLimit, left: number): RateDecision {
  return {
    allowed: false,
    limit: limit.burst,
    remaining: 0,
    retryAfterSeconds: Math.max(1, Math.ceil((1 - left) / limit.rate)),
  };
}

/** Shared when other processes may use the same store; in memory otherwise. */
export function createRequestLimits(
  store: Store,
  failureLimit: KeyRateLimit,
  shared: boolean,
  logger: Logger,
): RequestLimits {
  return shared
    ? new SharedRequestLimits(store, failureLimit, logger)
    : new LocalRequestLimits(failureLimit);
}
