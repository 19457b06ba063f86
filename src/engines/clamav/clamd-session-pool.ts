import type { ClamdAddress } from './clamd-client.js';
import type { ClamdTimeouts } from './clamd-connection.js';
import { ClamdSession } from './clamd-sessions.js';

/** How long sessions stay off after a server answered IDSESSION as if it did not know it. */
const UNSUPPORTED_PAUSE_MS = 60_000;

export interface SessionPoolOptions {
  /** Sessions open at most; a scan finding none idle and no room uses a plain connection. */
  size: number;
  /** A session is not used again once this long has passed since its last command went out. */
  idleMs: number;
  /** A session is closed after this many commands. */
  maxCommands: number;
}

/**
 * Idle sessions, most recently used first (so a lull lets the others age out). A session is taken
 * only if it is still young enough: clamd ends a session silent for its ReadTimeout, and one that
 * it ends as a command goes out would cost that command a retry.
 */
export class ClamdSessionPool {
  private readonly idle: ClamdSession[] = [];
  private open = 0;
  private closed = false;
  private unsupportedUntil = 0;

  constructor(
    private readonly address: ClamdAddress,
    private readonly timeouts: ClamdTimeouts,
    private readonly options: SessionPoolOptions,
  ) {}

  /** An idle session, a new one, or undefined when the pool is full (or off). */
  acquire(): ClamdSession | undefined {
    if (this.closed) return undefined;
    const now = performance.now();
    for (let session = this.idle.pop(); session !== undefined; session = this.idle.pop()) {
      if (this.fresh(session, now)) return session;
      session.close();
    }
    if (this.open >= this.options.size || now < this.unsupportedUntil) return undefined;
    this.open += 1;
    return new ClamdSession(this.address, this.timeouts, (gone) => this.forget(gone));
  }

  /** A session outside the pool, for one command while the pool is full; close it after. */
  standalone(): ClamdSession {
    return new ClamdSession(this.address, this.timeouts, () => undefined);
  }

  /** Back to the pool after a verdict; `reusable` false (an error reply) closes it. */
  release(session: ClamdSession, reusable: boolean): void {
    if (!reusable || this.closed || !this.fresh(session, performance.now())) {
      session.close();
      return;
    }
    session.park();
    if (session.retireTimer === undefined) {
      session.retireTimer = setTimeout(() => this.retire(session), this.options.idleMs);
      session.retireTimer.unref();
    } else {
      session.retireTimer.refresh();
    }
    this.idle.push(session);
  }

  /** The server does not speak IDSESSION: plain connections for a while. */
  suspend(): void {
    this.unsupportedUntil = performance.now() + UNSUPPORTED_PAUSE_MS;
  }

  close(): void {
    this.closed = true;
    for (const session of this.idle.splice(0)) session.close();
  }

  private fresh(session: ClamdSession, now: number): boolean {
    return (
      session.idle &&
      session.commandCount < this.options.maxCommands &&
      now - session.lastSentAt < this.options.idleMs
    );
  }

  private retire(session: ClamdSession): void {
    const at = this.idle.indexOf(session);
    if (at === -1) return;
    // The timer ran from the last release; the session may have been taken and returned since.
    if (this.fresh(session, performance.now())) {
      session.retireTimer?.refresh();
      return;
    }
    this.idle.splice(at, 1);
    session.close();
  }

  private forget(session: ClamdSession): void {
    this.open -= 1;
    const at = this.idle.indexOf(session);
    if (at !== -1) this.idle.splice(at, 1);
  }
}
