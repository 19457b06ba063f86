/**
 * Limits of callback deliveries: how many of one account run at once, how many of one account to
 * one destination, and a circuit that holds back an account's deliveries to a destination that
 * keeps failing for it. A destination is the scheme, host name and port of a callback URL: one
 * receiver, whatever the path or query. Limits and circuits are per account and destination (a
 * lane): one account's hanging or failing paths on a receiver never hold back another account's
 * deliveries to it, and an account's hanging receiver takes at most the destination's limit of
 * the account's share.
 */

/** A run of this many failed attempts in a row opens a destination's circuit. */
export const FAILURES_TO_OPEN_CIRCUIT = 5;
/** Longest wait of an open circuit (and of one delivery's retry). */
export const MAX_RETRY_DELAY_MS = 60 * 60 * 1000;
/** A destination's failure history is forgotten after this long without a delivery to it. */
const FORGET_AFTER_MS = MAX_RETRY_DELAY_MS;

/** `scheme://host:port` of a URL, the port always written out; '' for an unparsable URL. */
export function destinationOf(url: string): string {
  try {
    const parsed = new URL(url);
    const port = parsed.port !== '' ? parsed.port : parsed.protocol === 'https:' ? '443' : '80';
    return `${parsed.protocol}//${parsed.hostname}:${port}`;
  } catch {
    return '';
  }
}

/** Delay before retry `attempt` (1-based): exponential from the base, with full jitter in [½, 1]. */
export function retryDelayMs(attempt: number, baseMs: number, random = Math.random): number {
  const ceiling = Math.min(MAX_RETRY_DELAY_MS, baseMs * 2 ** Math.max(0, attempt - 1));
  return Math.round(ceiling / 2 + (random() * ceiling) / 2);
}

export type Admission =
  /** Send it now; it counts as in flight until `finish`. */
  | { kind: 'go' }
  /** The destination has all the deliveries it may have at once: try again when one ends. */
  | { kind: 'busy' }
  /** The destination's circuit is open: none of its deliveries is tried before `until` (ms). */
  | { kind: 'wait'; until: number };

/**
 * How an attempt ended, for its destination: `delivered` (a 2xx), `failed` (the receiver failed:
 * an error status, a network error, a timeout) or `neutral` (not the receiver's doing: refused by
 * the address policy, not sent, or not started).
 */
export type AttemptOutcome = 'delivered' | 'failed' | 'neutral';

/** An account's deliveries to one destination: what limits and circuits apply to. */
export interface Lane {
  accountId: string;
  destination: string;
}

/** What takes no new delivery now. */
export interface Busy {
  /** Accounts with all the deliveries they may have at once. */
  accounts: string[];
  /** Lanes at their limit, or probing an open circuit. */
  lanes: Lane[];
}

/**
 * The per-account and per-lane state the dispatcher consults. Kept in the process today (so the
 * limits are per process); the methods are asynchronous so that a shared store can hold it when
 * several processes deliver (issue 11).
 */
export interface DestinationGate {
  busy(now: number): Promise<Busy>;
  /** Asks to start a delivery in `lane`; on `go` it counts as in flight. */
  admit(lane: Lane, now: number): Promise<Admission>;
  /** Ends an admitted delivery; says whether the lane's circuit is open, and whether it just opened. */
  finish(lane: Lane, outcome: AttemptOutcome, now: number): Promise<Circuit>;
}

/** A lane's key in maps and sets. */
export function laneKey(lane: Lane): string {
  return `${lane.accountId} ${lane.destination}`;
}

/** A destination's circuit after an attempt: open until (ms) or null when closed. */
export interface Circuit {
  openUntil: number | null;
  /** This attempt opened it (or reopened it, after a failed probe). */
  opened: boolean;
}

interface DestinationState {
  lane: Lane;
  inFlight: number;
  /** Failed attempts in a row; a delivery resets it. */
  failures: number;
  /** Times the circuit opened in a row; more than 0 until a delivery closes it. */
  opens: number;
  /** While in the future, nothing is sent; once past (with `opens` > 0), one probe at a time. */
  openUntil: number;
  lastUsed: number;
}

export interface DestinationLimits {
  /** Deliveries of one account in flight to one destination at most. */
  concurrency: number;
  /** Deliveries of one account in flight at most. */
  accountConcurrency: number;
  /** First wait of an open circuit; each reopening doubles it (with jitter), up to an hour. */
  retryBaseMs: number;
}

/** The in-process DestinationGate: one process delivers, so its counts are the whole truth. */
export class InProcessDestinationGate implements DestinationGate {
  /** By lane key. */
  private readonly states = new Map<string, DestinationState>();
  /** Lanes with deliveries in flight: the only ones that can be busy. */
  private readonly active = new Set<string>();
  /** Deliveries in flight per account. */
  private readonly accounts = new Map<string, number>();
  private lastSweep = 0;

  constructor(
    private readonly limits: DestinationLimits,
    private readonly random: () => number = Math.random,
  ) {}

  async busy(now: number): Promise<Busy> {
    this.sweep(now);
    const lanes: Lane[] = [];
    for (const key of this.active) {
      const state = this.states.get(key);
      if (state !== undefined && this.isBusy(state)) lanes.push(state.lane);
    }
    const accounts = [...this.accounts]
      .filter(([, count]) => count >= this.limits.accountConcurrency)
      .map(([account]) => account);
    return { accounts, lanes };
  }

  async admit(lane: Lane, now: number): Promise<Admission> {
    const state = this.stateOf(lane, now);
    if (state.openUntil > now) return { kind: 'wait', until: state.openUntil };
    const account = this.accounts.get(lane.accountId) ?? 0;
    if (this.isBusy(state) || account >= this.limits.accountConcurrency) return { kind: 'busy' };
    state.inFlight += 1;
    this.accounts.set(lane.accountId, account + 1);
    this.active.add(laneKey(lane));
    return { kind: 'go' };
  }

  async finish(lane: Lane, outcome: AttemptOutcome, now: number): Promise<Circuit> {
    const key = laneKey(lane);
    const state = this.stateOf(lane, now);
    state.inFlight = Math.max(0, state.inFlight - 1);
    if (state.inFlight === 0) this.active.delete(key);
    const account = (this.accounts.get(lane.accountId) ?? 0) - 1;
    if (account > 0) this.accounts.set(lane.accountId, account);
    else this.accounts.delete(lane.accountId);
    if (outcome === 'delivered') {
      state.failures = 0;
      state.opens = 0;
      state.openUntil = 0;
    }
    let opened = false;
    if (outcome === 'failed') {
      state.failures += 1;
      const probeFailed = state.opens > 0 && state.openUntil <= now;
      const tooMany = state.opens === 0 && state.failures >= FAILURES_TO_OPEN_CIRCUIT;
      if (probeFailed || tooMany) {
        state.opens += 1;
        state.openUntil = now + retryDelayMs(state.opens, this.limits.retryBaseMs, this.random);
        opened = true;
      }
    }
    if (state.inFlight === 0 && state.failures === 0 && state.opens === 0) {
      this.states.delete(key);
    }
    return { openUntil: state.openUntil > now ? state.openUntil : null, opened };
  }

  /** An open circuit past its wait lets one probe through; a closed one, up to the limit. */
  private isBusy(state: DestinationState): boolean {
    return state.opens > 0 ? state.inFlight > 0 : state.inFlight >= this.limits.concurrency;
  }

  private stateOf(lane: Lane, now: number): DestinationState {
    const key = laneKey(lane);
    let state = this.states.get(key);
    if (state === undefined) {
      state = { lane, inFlight: 0, failures: 0, opens: 0, openUntil: 0, lastUsed: now };
      this.states.set(key, state);
    }
    state.lastUsed = now;
    return state;
  }

  /** Forgets idle lanes now and then, so failing ones cannot pile up in memory. */
  private sweep(now: number): void {
    if (now - this.lastSweep < 60_000) return;
    this.lastSweep = now;
    for (const [key, state] of this.states) {
      if (state.inFlight === 0 && now - Math.max(state.lastUsed, state.openUntil) > FORGET_AFTER_MS)
        this.states.delete(key);
    }
  }
}
