import { createHmac } from 'node:crypto';
import type { Logger } from 'pino';
import {
  OutboundError,
  type OutboundOptions,
  pingUrl,
  postBody,
} from '../outbound/guarded-http.js';
import { redactUrl } from '../outbound/target.js';
import type { CallbackDelivery } from '../store/records.js';
import type { Store } from '../store/store.js';
import { WorkLoop } from './work-loop.js';

export const SIGNATURE_HEADER = 'x-assay-signature';

export interface CallbackDispatcherOptions {
  outbound: OutboundOptions;
  /** Concurrent deliveries: a slow receiver holds one slot, never the others. */
  concurrency: number;
  /** First retry delay; each further retry waits twice as long (with jitter), at most an hour. */
  retryBaseMs: number;
  /** How long a delivery is tried before it is given up. */
  maxAgeMs: number;
}

const MAX_RETRY_DELAY_MS = 60 * 60 * 1000;
/** A claimed delivery is due again after this long if its process dies mid-attempt. */
const LEASE_MS = 2 * 60 * 1000;

/**
 * `t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">` with the account's callback secret: the
 * receiver recomputes it, compares in constant time and rejects old timestamps (replays).
 */
export function signCallback(secret: string, body: string, timestamp: number): string {
  const mac = createHmac('sha256', secret).update(`${timestamp}.${body}`).digest('hex');
  return `t=${timestamp},v1=${mac}`;
}

/** Delay before retry `attempt` (1-based): exponential from the base, with full jitter in [½, 1]. */
export function retryDelayMs(attempt: number, baseMs: number, random = Math.random): number {
  const ceiling = Math.min(MAX_RETRY_DELAY_MS, baseMs * 2 ** Math.max(0, attempt - 1));
  return Math.round(ceiling / 2 + (random() * ceiling) / 2);
}

/** Delivers the callback outbox: at least once, retried with backoff, each attempt in the trace. */
export class CallbackDispatcher {
  private readonly inFlight = new Map<string, Promise<void>>();
  private readonly loop: WorkLoop;

  constructor(
    private readonly store: Store,
    private readonly options: CallbackDispatcherOptions,
    private readonly logger: Logger,
  ) {
    this.loop = new WorkLoop(
      () => this.tick(),
      (error) => this.logger.error({ err: error }, 'callback loop round failed'),
    );
  }

  start(): void {
    this.loop.start();
  }

  notify(): void {
    this.loop.notify();
  }

  /** Stops taking deliveries and waits (up to `graceMs`) for attempts under way. */
  async stop(graceMs: number): Promise<void> {
    await this.loop.stop();
    const timeout = new Promise((resolve) => setTimeout(resolve, graceMs).unref());
    await Promise.race([Promise.all(this.inFlight.values()), timeout]);
  }

  private async tick(): Promise<number> {
    const free = this.options.concurrency - this.inFlight.size;
    if (free > 0) {
      const now = new Date();
      const due = await this.store.callbacks.due(now.toISOString(), free + this.inFlight.size);
      for (const delivery of due.filter((d) => !this.inFlight.has(d.id)).slice(0, free)) {
        const leaseUntil = new Date(now.getTime() + LEASE_MS).toISOString();
        if (!(await this.store.callbacks.claim(delivery, leaseUntil))) continue;
        const attempt = this.attempt({ ...delivery, attempts: delivery.attempts + 1 }).finally(
          () => {
            this.inFlight.delete(delivery.id);
            this.loop.notify();
          },
        );
        this.inFlight.set(delivery.id, attempt);
      }
    }
    const next = await this.store.callbacks.nextDue();
    return next === null ? 1000 : Math.min(1000, Date.parse(next) - Date.now());
  }

  private async attempt(delivery: CallbackDelivery): Promise<void> {
    const target = redactUrl(delivery.url);
    let failure: string;
    try {
      const account = await this.store.accounts.find(delivery.accountId);
      const timestamp = Math.floor(Date.now() / 1000);
      const headers = {
        [SIGNATURE_HEADER]: signCallback(account?.callbackSecret ?? '', delivery.body, timestamp),
        'x-assay-delivery': delivery.id,
        'x-assay-attempt': String(delivery.attempts),
      };
      // A v1.0 ping is a bare GET; its signature covers the empty body.
      const { status } =
        delivery.method === 'GET'
          ? await pingUrl(delivery.url, headers, this.options.outbound)
          : await postBody(
              delivery.url,
              Buffer.from(delivery.body),
              { 'content-type': delivery.contentType, ...headers },
              this.options.outbound,
            );
      if (status >= 200 && status < 300) {
        const at = new Date().toISOString();
        await this.store.callbacks.settle(delivery.id, { state: 'delivered', at, error: null });
        await this.store.trace.append(
          delivery.fileId,
          `callback attempt ${delivery.attempts} to ${target}: delivered (HTTP ${status})`,
        );
        return;
      }
      failure = `HTTP ${status}`;
    } catch (error) {
      if (!(error instanceof OutboundError))
        this.logger.error({ err: error }, 'callback attempt failed');
      failure = error instanceof Error ? error.message : String(error);
    }
    const now = Date.now();
    const nextAttempt = now + retryDelayMs(delivery.attempts, this.options.retryBaseMs);
    if (nextAttempt - Date.parse(delivery.creationDate) > this.options.maxAgeMs) {
      await this.store.callbacks.settle(delivery.id, {
        state: 'failed',
        at: new Date(now).toISOString(),
        error: failure,
      });
      await this.store.trace.append(
        delivery.fileId,
        `callback attempt ${delivery.attempts} to ${target}: ${failure}; given up`,
      );
      this.logger.warn({ delivery: delivery.id, target, failure }, 'callback given up');
      return;
    }
    const nextAttemptAt = new Date(nextAttempt).toISOString();
    await this.store.callbacks.settle(delivery.id, {
      state: 'pending',
      nextAttemptAt,
      error: failure,
    });
    await this.store.trace.append(
      delivery.fileId,
      `callback attempt ${delivery.attempts} to ${target}: ${failure}; next attempt at ${nextAttemptAt}`,
    );
  }
}
