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
export const FORGET_AFTER_MS = MAX_RETRY_DELAY_MS;

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
 * The per-account and per-lane state the dispatcher consults: held in the process when one
 * process delivers (InProcessDestinationGate), in the store when several may
 * (SharedDestinationGate), so the limits hold for the whole deployment.
 */
export interface DestinationGate {
  busy(now: number): Promise<Busy>;
  /** Asks to start delivery `id` in `lane`; on `go` it counts as in flight until `finish`. */
  admit(lane: Lane, id: string, now: number): Promise<Admission>;
  /** Ends an admitted delivery; says whether the lane's circuit is open, and whether it just opened. */
  finish(lane: Lane, id: string, outcome: AttemptOutcome, now: number): Promise<Circuit>;
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

/** A lane's circuit: failed attempts in a row, times it opened in a row, open until (ms). */
export interface CircuitState {
  /** Failed attempts in a row; a delivery resets it. */
  failures: number;
  /** Times the circuit opened in a row; more than 0 until a delivery closes it. */
  opens: number;
  /** While in the future, nothing is sent; once past (with `opens` > 0), one probe at a time. */
  openUntil: number;
}

/** A lane's circuit after an attempt that ended with `outcome` (both gates' rule). */
export function circuitAfter(
  state: CircuitState,
  outcome: AttemptOutcome,
  now: number,
  retryBaseMs: number,
  random: () => number,
): CircuitState & { opened: boolean } {
  if (outcome === 'delivered') return { failures: 0, opens: 0, openUntil: 0, opened: false };
  if (outcome === 'neutral') return { ...state, opened: false };
  const failures = state.failures + 1;
  const probeFailed = state.opens > 0 && state.openUntil <= now;
  const tooMany = state.opens === 0 && failures >= FAILURES_TO_OPEN_CIRCUIT;
  if (!probeFailed && !tooMany) return { ...state, failures, opened: false };
  const opens = state.opens + 1;
  return {
    failures,
    opens,
    openUntil: now + retryDelayMs(opens, retryBaseMs, random),
    opened: true,
  };
}

/** An open circuit past its wait lets one probe through; a closed one, up to `limit`. */
export function laneIsBusy(circuit: CircuitState, inFlight: number, limit: number): boolean {
  return circuit.opens > 0 ? inFlight > 0 : inFlight >= limit;
}

interface DestinationState extends CircuitState {
  lane: Lane;
  inFlight: number;
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

  async admit(lane: Lane, _id: string, now: number): Promise<Admission> {
    const state = this.stateOf(lane, now);
    if (state.openUntil > now) return { kind: 'wait', until: state.openUntil };
    const account = this.accounts.get(lane.accountId) ?? 0;
    if (this.isBusy(state) || account >= this.limits.accountConcurrency) return { kind: 'busy' };
    state.inFlight += 1;
    this.accounts.set(lane.accountId, account + 1);
    this.active.add(laneKey(lane));
    return { kind: 'go' };
  }

  async finish(lane: Lane, _id: string, outcome: AttemptOutcome, now: number): Promise<Circuit> {
    const key = laneKey(lane);
    const state = this.stateOf(lane, now);
    state.inFlight = Math.max(0, state.inFlight - 1);
    if (state.inFlight === 0) this.active.delete(key);
    const account = (this.accounts.get(lane.accountId) ?? 0) - 1;
    if (account > 0) this.accounts.set(lane.accountId, account);
    else this.accounts.delete(lane.accountId);
    const next = circuitAfter(state, outcome, now, this.limits.retryBaseMs, this.random);
    state.failures = next.failures;
    state.opens = next.opens;
    state.openUntil = next.openUntil;
    if (state.inFlight === 0 && state.failures === 0 && state.opens === 0) {
      this.states.delete(key);
    }
    return { openUntil: state.openUntil > now ? state.openUntil : null, opened: next.opened };
  }

  private isBusy(state: DestinationState): boolean {
    return laneIsBusy(state, state.inFlight, this.limits.concurrency);
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
