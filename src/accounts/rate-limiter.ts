import type { KeyRateLimit } from '../domain/records.js';

/** What one request learns from its bucket; the numbers go into `x-ratelimit-*` headers. */
export interface RateDecision {
  allowed: boolean;
  /** The bucket's size: requests allowed at once. */
  limit: number;
  /** Whole requests left right now. */
  remaining: number;
  /** When refused: seconds until one request is allowed again (at least 1). */
  retryAfterSeconds: number;
}

interface Bucket {
  tokens: number;
  at: number;
  limit: KeyRateLimit;
}

/** Buckets idle long enough to be full again are forgotten once the map grows past this. */
const SWEEP_ABOVE = 10_000;

/**
 * Token buckets by name (a key id, a client address), in memory: each instance of Assay limits
 * what it serves. A bucket refills at `rate` per second up to `burst`; rate 0 means no limit.
 */
export class TokenBuckets {
  private readonly buckets = new Map<string, Bucket>();

  constructor(private readonly clock: () => number = () => performance.now()) {}

  /** Takes one request from the bucket, if it has one. */
  take(name: string, limit: KeyRateLimit): RateDecision {
    return this.decide(name, limit, true);
  }

  /** Whether the bucket has a request left, taking nothing. */
  peek(name: string, limit: KeyRateLimit): RateDecision {
    return this.decide(name, limit, false);
  }

  private decide(name: string, limit: KeyRateLimit, consume: boolean): RateDecision {
    if (limit.rate === 0) {
      return { allowed: true, limit: limit.burst, remaining: limit.burst, retryAfterSeconds: 0 };
    }
    const now = this.clock();
    const bucket = this.buckets.get(name) ?? { tokens: limit.burst, at: now, limit };
    bucket.limit = limit;
    bucket.tokens = Math.min(limit.burst, bucket.tokens + ((now - bucket.at) / 1000) * limit.rate);
    bucket.at = now;
    const allowed = bucket.tokens >= 1;
    if (allowed && consume) bucket.tokens -= 1;
    // A peek at a full bucket need not remember it: every address that authenticates peeks.
    if (consume && !this.buckets.has(name)) {
      if (this.buckets.size >= SWEEP_ABOVE) this.sweep(now);
      this.buckets.set(name, bucket);
    }
    return {
      allowed,
      limit: limit.burst,
      remaining: Math.floor(bucket.tokens),
      retryAfterSeconds: allowed ? 0 : Math.max(1, Math.ceil((1 - bucket.tokens) / limit.rate)),
    };
  }

  /** Drops buckets that have refilled completely: forgetting them changes no decision. */
  private sweep(now: number): void {
    for (const [name, { tokens, at, limit }] of this.buckets) {
      if (tokens + ((now - at) / 1000) * limit.rate >= limit.burst) {
        this.buckets.delete(name);
      }
    }
  }
}

/**
 * The limit a key's requests get: the stricter of its ceiling (the operator's limit for it, else
 * the service's default) and the limit its account set itself. Rate 0 is no limit.
 */
export function appliedRateLimit(ceiling: KeyRateLimit, own: KeyRateLimit | null): KeyRateLimit {
  if (own === null || own.rate === 0) return ceiling;
  if (ceiling.rate === 0) return own;
  return { rate: Math.min(ceiling.rate, own.rate), burst: Math.min(ceiling.burst, own.burst) };
}

/**
 * The account's own limit of `rate` requests per second (0: none) under `ceiling`: its burst is
 * twice the rate, within the ceiling's. Null when it would let more through than the ceiling: the
 * account can lower the operator's limit, never raise it.
 */
export function accountRateLimit(rate: number, ceiling: KeyRateLimit): KeyRateLimit | null {
  const burst = Math.max(1, Math.ceil(rate * 2));
  if (ceiling.rate === 0) return { rate, burst };
  if (rate === 0 || rate > ceiling.rate) return null;
  return { rate, burst: Math.min(burst, ceiling.burst) };
}
