import type { Store } from '../store/store.js';
import {
  type Admission,
  type AttemptOutcome,
  type Busy,
  type Circuit,
  circuitAfter,
  type DestinationGate,
  type DestinationLimits,
  FORGET_AFTER_MS,
  type Lane,
  laneIsBusy,
} from './callback-destinations.js';

/** Lanes and admissions left behind are looked for at most this often. */
const FORGET_EVERY_MS = 60_000;

/**
 * The callback limits and circuits in the store, shared by every process delivering from it, so
 * an account's caps hold for the whole deployment, not per process (issue 28). An admission is a
 * row held until the attempt ends or the delivery's lease does: a process that dies mid-attempt
 * frees its share when the delivery is due again. An account's admissions take its lock in turn.
 */
export class SharedDestinationGate implements DestinationGate {
  private forgottenAt = 0;

  constructor(
    private readonly store: Store,
    private readonly limits: DestinationLimits,
    /** How long an admitted delivery counts if its attempt never ends: its lease. */
    private readonly leaseMs: number,
    private readonly random: () => number = Math.random,
  ) {}

  async busy(now: number): Promise<Busy> {
    if (now - this.forgottenAt >= FORGET_EVERY_MS) {
      this.forgottenAt = now;
      await this.store.callbackLanes.forget(now, now - FORGET_AFTER_MS);
    }
    return this.store.callbackLanes.busy(now, {
      accountLimit: this.limits.accountConcurrency,
      laneLimit: this.limits.concurrency,
    });
  }

  admit(lane: Lane, id: string, now: number): Promise<Admission> {
    return this.store.transaction(async (store) => {
      await store.callbackLanes.lockAccount(lane.accountId, now);
      const circuit = await store.callbackLanes.circuit(lane);
      if (circuit.openUntil > now) return { kind: 'wait', until: circuit.openUntil };
      const inFlight = await store.callbackLanes.inFlight(lane, now);
      if (
        laneIsBusy(circuit, inFlight.lane, this.limits.concurrency) ||
        inFlight.account >= this.limits.accountConcurrency
      ) {
        return { kind: 'busy' };
      }
      const admitted = await store.callbackLanes.admit(id, lane, now, now + this.leaseMs);
      return admitted ? { kind: 'go' } : { kind: 'busy' };
    });
  }

  finish(lane: Lane, id: string, outcome: AttemptOutcome, now: number): Promise<Circuit> {
    return this.store.transaction(async (store) => {
      // Under the account's lock, taken first as in `admit`: two attempts ending at once both count.
      await store.callbackLanes.lockAccount(lane.accountId, now);
      await store.callbackLanes.release(id);
      const before = await store.callbackLanes.circuit(lane);
      const after = circuitAfter(before, outcome, now, this.limits.retryBaseMs, this.random);
      if (outcome !== 'neutral') await store.callbackLanes.saveCircuit(lane, after, now);
      return { openUntil: after.openUntil > now ? after.openUntil : null, opened: after.opened };
    });
  }
}
