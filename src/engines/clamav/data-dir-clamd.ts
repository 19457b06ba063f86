import { join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { type ClamdAddress, ClamdClient } from './clamd-client.js';
import type { ClamdLimits } from './clamd-config.js';
import { sendClamdCommand } from './clamd-loads.js';
import { ClamdOwnerLock } from './clamd-owner-lock.js';
import { ManagedClamd, type ManagedClamdOptions } from './managed-clamd.js';

/** How often a process that does not run the clamd looks whether its runner has gone. */
const TAKEOVER_CHECK_MS = 1_000;
/** Up to this much is added to each look, so processes started together do not keep colliding. */
const TAKEOVER_JITTER_MS = 250;
/** After a takeover whose clamd did not start, the next is tried after this, doubling. */
const TAKEOVER_RETRY_MIN_MS = 5_000;
const TAKEOVER_RETRY_MAX_MS = 60_000;
/** How long a clamd its runner left behind (killed) may take to go before a new one starts. */
const STRAY_CLAMD_GRACE_MS = 15_000;
const DEFAULT_START_TIMEOUT_MS = 120_000;

/**
 * A data dir's managed clamd, one for every process that shares the dir (an api and workers on one
 * SQLite folder; a second `serve` started by mistake): the process that holds the dir's lock
 * (ClamdOwnerLock) runs it, as ManagedClamd, and prepares its folder; the others use its socket,
 * as `--processes` children do, and try the lock every second, so one of them runs it within
 * seconds when its runner ends, however it ends. Only the runner removes or rewrites anything in
 * `<data dir>/clamd/`.
 */
export class DataDirClamd {
  readonly address: ClamdAddress;
  readonly limits: ClamdLimits;
  private readonly clamd: ManagedClamd;
  private readonly lock: ClamdOwnerLock;
  private readonly socketPath: string;
  private readonly logger: ManagedClamdOptions['logger'];
  private readonly startTimeoutMs: number;
  private stopped = true;
  private takeoverTimer: NodeJS.Timeout | undefined;
  private takeover: Promise<void> | null = null;
  private takeoverRetryMs = TAKEOVER_RETRY_MIN_MS;
  private nextTakeoverAt = 0;

  constructor(options: ManagedClamdOptions) {
    this.clamd = new ManagedClamd(options);
    this.address = this.clamd.address;
    this.limits = this.clamd.limits;
    const dir = join(resolve(options.dataDir), 'clamd');
    this.lock = new ClamdOwnerLock(join(dir, 'owner.lock'));
    this.socketPath = join(dir, 'clamd.sock');
    this.logger = options.logger;
    this.startTimeoutMs = options.startTimeoutMs ?? DEFAULT_START_TIMEOUT_MS;
  }

  /** clamd's pid while this process runs it. */
  get pid(): number | undefined {
    return this.lock.isHeld ? this.clamd.pid : undefined;
  }

  /** Whether this process runs the data dir's clamd. */
  get runsClamd(): boolean {
    return this.lock.isHeld;
  }

  /** Runs the data dir's clamd, or waits until the process that runs it answers on its socket. */
  async start(): Promise<void> {
    this.stopped = false;
    if (this.lock.tryAcquire()) {
      try {
        await this.run();
      } catch (error) {
        this.stopped = true;
        this.lock.release();
        throw error;
      }
      return;
    }
    this.logger.info(
      { socket: this.socketPath },
      "another process runs this data dir's clamd: using its socket",
    );
    this.scheduleTakeoverCheck();
    try {
      await this.waitUntilAnswering();
    } catch (error) {
      await this.stop();
      throw error;
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.takeoverTimer);
    // A takeover under way ends with its clamd (stopped twice: it may spawn after the first).
    await this.clamd.stop();
    await this.takeover;
    await this.clamd.stop();
    this.lock.release();
  }

  /** With the lock held: a clamd its last runner left (killed) goes first, then ours starts. */
  private async run(): Promise<void> {
    await this.retireStrayClamd();
    await this.clamd.start();
  }

  private scheduleTakeoverCheck(): void {
    if (this.stopped) return;
    const delayMs = TAKEOVER_CHECK_MS + Math.random() * TAKEOVER_JITTER_MS;
    this.takeoverTimer = setTimeout(() => {
      this.takeover = this.tryTakeover().finally(() => {
        this.takeover = null;
        if (!this.lock.isHeld) this.scheduleTakeoverCheck();
      });
    }, delayMs);
    this.takeoverTimer.unref();
  }

  private async tryTakeover(): Promise<void> {
    if (this.stopped || Date.now() < this.nextTakeoverAt) return;
    try {
      if (!this.lock.tryAcquire()) return;
    } catch (error) {
      this.logger.error({ err: error }, "cannot tell whether this data dir's clamd still runs");
      return;
    }
    this.logger.warn(
      { socket: this.socketPath },
      "the process that ran this data dir's clamd has ended: this one runs it now",
    );
    try {
      await this.run();
      this.takeoverRetryMs = TAKEOVER_RETRY_MIN_MS;
    } catch (error) {
      await this.clamd.stop();
      this.lock.release();
      if (this.stopped) return;
      this.nextTakeoverAt = Date.now() + this.takeoverRetryMs;
      this.logger.error(
        { err: error, retryInMs: this.takeoverRetryMs },
        'clamd did not start; another process on this data dir may start it, or this one will try again',
      );
      this.takeoverRetryMs = Math.min(2 * this.takeoverRetryMs, TAKEOVER_RETRY_MAX_MS);
    }
  }

  /** Until clamd answers PING (run by another process, or by this one once it took over). */
  private async waitUntilAnswering(): Promise<void> {
    const client = pingClient(this.address);
    const deadline = Date.now() + this.startTimeoutMs;
    for (;;) {
      if (await answers(client)) return;
      if (Date.now() >= deadline) {
        throw new Error(
          `the clamd another process runs for this data dir did not answer on ${this.socketPath} within ${this.startTimeoutMs} ms`,
        );
      }
      await sleep(250);
    }
  }

  /**
   * No process holds the lock, so a clamd still answering on the socket runs for nobody: its
   * runner was killed and it has not ended yet (or never will, without setpriv's parent-death
   * signal). It is asked to shut down and given a while to go; a clamd of ours would not start
   * beside it, and its exit would remove our socket.
   */
  private async retireStrayClamd(): Promise<void> {
    const client = pingClient(this.address);
    const deadline = Date.now() + STRAY_CLAMD_GRACE_MS;
    let asked = false;
    while ((await answers(client)) && Date.now() < deadline) {
      if (!asked) {
        asked = true;
        this.logger.warn(
          { socket: this.socketPath },
          "a clamd that no process runs answers on this data dir's socket: asking it to shut down",
        );
        await sendClamdCommand(this.socketPath, 'SHUTDOWN');
      }
      await sleep(200);
    }
  }
}

function pingClient(address: ClamdAddress): ClamdClient {
  return new ClamdClient(address, { connectTimeoutMs: 1_000, idleTimeoutMs: 2_000, sessions: 0 });
}

async function answers(client: ClamdClient): Promise<boolean> {
  try {
    await client.ping();
    return true;
  } catch {
    return false;
  }
}
