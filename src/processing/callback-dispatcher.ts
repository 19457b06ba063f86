import type { Logger } from 'pino';
import type { CallbackDelivery } from '../domain/records.js';
import type { OutboundOptions } from '../outbound/guarded-http.js';
import { redactUrl } from '../outbound/target.js';
import type { Store } from '../store/store.js';
import {
  type AttemptOutcome,
  type DestinationGate,
  InProcessDestinationGate,
  type Lane,
  laneKey,
  retryDelayMs,
} from './callback-destinations.js';
import { type Attempted, CallbackSender } from './callback-sender.js';
import { type ProcessingEvents, UNOBSERVED } from './processing-events.js';
import { untilStored } from './until-stored.js';
import type { WorkDelivery } from './work-delivery.js';
import { WorkLoop } from './work-loop.js';

function laneOf(delivery: CallbackDelivery): Lane {
  return { accountId: delivery.accountId, destination: delivery.destination };
}

export interface CallbackDispatcherOptions {
  outbound: OutboundOptions;
  /** Deliveries in flight in this process (ASSAY_CALLBACK_CONCURRENCY). */
  concurrency: number;
  /** Deliveries of one account in flight at most: other accounts always find a slot. */
  accountConcurrency: number;
  /**
   * Deliveries of one account to one destination (scheme, host and port) in flight at most: a
   * receiver that hangs holds only these, never the account's other receivers' share.
   */
  destinationConcurrency: number;
  /**
   * First retry delay; each further retry waits twice as long (with jitter), at most an hour. Also
   * the first wait of a destination whose circuit opens.
   */
  retryBaseMs: number;
  /** How long a delivery is tried before it is given up. */
  maxAgeMs: number;
  /** Per-account and per-destination limits and circuits; by default held in this process. */
  destinations?: DestinationGate;
  /** Told of each attempt's outcome and of deliveries given up (the metrics). */
  events?: ProcessingEvents;
}

/** A claimed delivery is due again after this long if its process dies mid-attempt. */
export const CALLBACK_LEASE_MS = 2 * 60 * 1000;
/** Longest sleep of the loop: a submission or a finished attempt wakes it sooner. */
const IDLE_MS = 1000;
/** A delivered callback whose lane is full is delivered again after this long. */
const LANE_BUSY_RETRY_MS = 1000;
/** The rank (see DueWork) of a delivery announced again because its lane was full. */
const HELD_BACK_RANK = 1;

/**
 * Delivers the callback outbox: at least once, retried with backoff, each attempt in the trace. A
 * destination takes a bounded number of deliveries at once, and one that keeps failing is held
 * back as a whole (its circuit opens) instead of each delivery failing on its own.
 */
export class CallbackDispatcher {
  private readonly inFlight = new Map<string, Promise<void>>();
  private readonly loop: WorkLoop;
  private readonly destinations: DestinationGate;
  private readonly events: ProcessingEvents;
  private readonly sender: CallbackSender;
  /** Aborted by stop(): writes the store refused stop being retried (their lease takes over). */
  private readonly stopping = new AbortController();

  /** @param delivery where due deliveries come from; by default the outbox's due list (WorkLoop). */
  constructor(
    private readonly store: Store,
    private readonly options: CallbackDispatcherOptions,
    private readonly logger: Logger,
    private readonly delivery?: WorkDelivery,
  ) {
    this.events = options.events ?? UNOBSERVED;
    this.sender = new CallbackSender(store, options.outbound, logger);
    this.destinations =
      options.destinations ??
      new InProcessDestinationGate({
        concurrency: options.destinationConcurrency,
        accountConcurrency: options.accountConcurrency,
        retryBaseMs: options.retryBaseMs,
      });
    this.loop = new WorkLoop(
      () => this.tick(),
      (error) => this.logger.error({ err: error }, 'callback loop round failed'),
    );
  }

  async start(): Promise<void> {
    if (this.delivery === undefined) {
      this.loop.start();
      return;
    }
    // Deliveries written without a dispatch (migrate-store, an older version) are announced once.
    await this.store.callbacks.redispatch({ all: true });
    await this.delivery.deliver(
      'callback',
      { slots: this.options.concurrency, perAccount: this.options.accountConcurrency },
      (id) => this.delivered(id),
    );
  }

  notify(): void {
    this.loop.notify();
    this.delivery?.wake('callback');
  }

  /** Stops taking deliveries and waits (up to `graceMs`) for attempts under way. */
  async stop(graceMs: number): Promise<void> {
    this.stopping.abort();
    await this.loop.stop();
    await this.delivery?.stopDelivering('callback');
    const timeout = new Promise((resolve) => setTimeout(resolve, graceMs).unref());
    await Promise.race([Promise.all(this.inFlight.values()), timeout]);
  }

  private async tick(): Promise<number> {
    let free = this.options.concurrency - this.inFlight.size;
    if (free <= 0) return IDLE_MS; // a finished attempt wakes the loop
    const now = Date.now();
    const heldBack = new Set<string>();
    // Each round starts or holds back at least one delivery, or ends the tick. Accounts and lanes
    // with all the deliveries they may have are left out of the next round's query, so the
    // oldest deliveries of a busy account never hide another account's.
    for (;;) {
      const busy = await this.destinations.busy(now);
      const due = await this.store.callbacks.due(new Date(now).toISOString(), free, busy);
      let progressed = false;
      for (const delivery of due) {
        const lane = laneOf(delivery);
        if (free <= 0 || this.inFlight.has(delivery.id) || heldBack.has(laneKey(lane))) continue;
        const admission = await this.destinations.admit(lane, delivery.id, now);
        if (admission.kind === 'busy') continue;
        if (admission.kind === 'wait') {
          await this.holdBack(lane, admission.until, now);
          heldBack.add(laneKey(lane));
          progressed = true;
          continue;
        }
        if (await this.claim(delivery, now)) {
          free -= 1;
          progressed = true;
        }
      }
      if (due.length === 0 || !progressed || free <= 0) break;
    }
    if (free <= 0) return IDLE_MS;
    const next = await this.store.callbacks.nextDue(await this.destinations.busy(Date.now()));
    if (next === null) return IDLE_MS;
    return Math.max(10, Math.min(IDLE_MS, Date.parse(next) - Date.now()));
  }

  /**
   * A delivery handed over by the WorkDelivery: attempted once if it is due and its lane admits
   * it; otherwise announced again for when it may be (a full lane: shortly; an open circuit: when
   * it closes). A settled one ends here.
   */
  private async delivered(id: string): Promise<void> {
    const now = Date.now();
    const delivery = await this.store.callbacks.find(id);
    if (delivery === null || delivery.state !== 'pending') return;
    if (Date.parse(delivery.nextAttemptAt) > now || this.inFlight.has(id)) {
      await this.store.callbacks.redispatch({ id });
      return;
    }
    const lane = laneOf(delivery);
    const admission = await this.destinations.admit(lane, id, now);
    if (admission.kind === 'busy') {
      // Behind the account's fresh deliveries: a backlog held for one full lane, announced again
      // every second, must not stand before a delivery to another receiver.
      const at = new Date(now + LANE_BUSY_RETRY_MS).toISOString();
      await this.store.callbacks.redispatch({ id, at, rank: HELD_BACK_RANK });
      return;
    }
    if (admission.kind === 'wait') {
      await this.holdBack(lane, admission.until, now);
      await this.store.callbacks.redispatch({ id });
      return;
    }
    if (await this.claim(delivery, now)) await this.inFlight.get(id);
    else await this.store.callbacks.redispatch({ id });
  }

  /** Takes an admitted delivery (its destination slot is released if that fails) and starts it. */
  private async claim(delivery: CallbackDelivery, now: number): Promise<boolean> {
    let claimed = false;
    try {
      const leaseUntil = new Date(now + CALLBACK_LEASE_MS).toISOString();
      claimed = await this.store.callbacks.claim(delivery, leaseUntil);
    } finally {
      if (!claimed) {
        await this.stored('release a callback destination slot', delivery, () =>
          this.destinations.finish(laneOf(delivery), delivery.id, 'neutral', now),
        );
      }
    }
    if (!claimed) return false;
    const attempt = this.attempt({ ...delivery, attempts: delivery.attempts + 1 })
      .catch((error: unknown) => this.logger.error({ err: error }, 'callback attempt failed'))
      .finally(() => {
        this.inFlight.delete(delivery.id);
        this.loop.notify();
      });
    this.inFlight.set(delivery.id, attempt);
    return true;
  }

  /**
   * A lane whose circuit is open: its deliveries wait until `until` without using an attempt,
   * and those that would pass their maximum age by then are given up.
   */
  private async holdBack(lane: Lane, until: number, now: number): Promise<void> {
    const { accountId, destination } = lane;
    const at = new Date(now).toISOString();
    const expired = await this.store.callbacks.expireDestination(
      accountId,
      destination,
      new Date(until - this.options.maxAgeMs).toISOString(),
      { at, error: 'its destination kept failing' },
    );
    for (const delivery of expired) {
      const last = delivery.lastError === null ? '' : ` (last: ${delivery.lastError})`;
      await this.traceSafely(
        delivery.fileId,
        `callback to ${destination}: its destination kept failing${last}; given up`,
      );
    }
    if (expired.length > 0) {
      this.events.callbacksGivenUp(expired.length);
      this.logger.warn({ destination, count: expired.length }, 'callbacks given up');
    }
    await this.store.callbacks.deferDestination(
      accountId,
      destination,
      new Date(until).toISOString(),
    );
  }

  /**
   * One attempt, then its record; never rejects. A write the store refuses is tried again until it
   * is taken; only at shutdown is it left to the delivery's lease.
   */
  private async attempt(delivery: CallbackDelivery): Promise<void> {
    const target = redactUrl(delivery.url);
    const attempted = await this.sender.send(delivery);
    const outcome: AttemptOutcome =
      attempted.kind === 'delivered'
        ? 'delivered'
        : attempted.kind === 'failed'
          ? attempted.outcome
          : 'neutral';
    // Until the store takes them: an admission left held would keep its share of the lane and of
    // the account for the delivery's lease (2 minutes), and an outcome not recorded would send the
    // callback again when the lease ends.
    const finished = await this.stored('update the state of a callback destination', delivery, () =>
      this.destinations.finish(laneOf(delivery), delivery.id, outcome, Date.now()),
    );
    const circuit = finished.stored ? finished.value : null;
    const openUntil = circuit?.openUntil ?? null;
    if (circuit?.opened === true && openUntil !== null) {
      this.logger.warn(
        {
          account: delivery.accountId,
          destination: delivery.destination,
          until: new Date(openUntil).toISOString(),
        },
        'callback destination keeps failing: its deliveries wait',
      );
    }
    await this.record(delivery, target, attempted, openUntil);
  }

  /** A write retried until the store takes it, or this dispatcher stops (the lease takes over). */
  private stored<T>(what: string, delivery: CallbackDelivery, write: () => Promise<T>) {
    return untilStored(write, what, {
      logger: this.logger,
      stopping: this.stopping.signal,
      fields: { delivery: delivery.id },
    });
  }

  private async record(
    delivery: CallbackDelivery,
    target: string,
    attempted: Attempted,
    openUntil: number | null,
  ): Promise<void> {
    const prefix = `callback attempt ${delivery.attempts} to ${target}`;
    const now = Date.now();
    const at = new Date(now).toISOString();
    const settle = (outcome: Parameters<Store['callbacks']['settle']>[1]) =>
      this.stored('record a callback attempt', delivery, () =>
        this.store.callbacks.settle(delivery.id, outcome),
      );
    const trace = (message: string) =>
      this.stored('append to a trace', delivery, () =>
        this.store.trace.append(delivery.fileId, message),
      );
    if (attempted.kind === 'delivered') {
      await settle({ state: 'delivered', at, error: null });
      this.events.callbackAttempted('delivered');
      await trace(`${prefix}: delivered (HTTP ${attempted.status})`);
      return;
    }
    const { failure } = attempted;
    this.events.callbackAttempted('failed');
    // An open circuit holds this delivery back with the others of its destination.
    const ownRetry = now + retryDelayMs(delivery.attempts, this.options.retryBaseMs);
    const nextAttempt = Math.max(ownRetry, openUntil ?? 0);
    if (
      attempted.kind === 'undeliverable' ||
      nextAttempt - Date.parse(delivery.creationDate) > this.options.maxAgeMs
    ) {
      await settle({ state: 'failed', at, error: failure });
      this.events.callbacksGivenUp(1);
      await trace(`${prefix}: ${failure}; given up`);
      this.logger.warn({ delivery: delivery.id, target, failure }, 'callback given up');
      return;
    }
    const nextAttemptAt = new Date(nextAttempt).toISOString();
    await settle({ state: 'pending', nextAttemptAt, error: failure });
    const heldBack = nextAttempt > ownRetry ? ' (its destination keeps failing)' : '';
    await trace(`${prefix}: ${failure}; next attempt at ${nextAttemptAt}${heldBack}`);
  }

  /** A trace line that must not stop the loop when it cannot be written. */
  private async traceSafely(fileId: string, message: string): Promise<void> {
    try {
      await this.store.trace.append(fileId, message);
    } catch (error) {
      this.logger.error({ err: error, file: fileId }, 'could not append to a trace');
    }
  }
}
