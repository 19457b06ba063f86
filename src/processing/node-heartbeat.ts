import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import type { Logger } from 'pino';
import type { NodeHeartbeat as NodeRecord } from '../domain/operations.js';
import type { ClamdVersion } from '../engines/clamav/clamd-client.js';
import { PeriodicTask } from '../periodic-task.js';
import type { Store } from '../store/store.js';

/**
 * How often each process writes its heartbeat: a node is marked stale after four missed ones
 * (NODE_STALE_MS), and an idle deployment's database is not kept busy (issue 28).
 */
export const HEARTBEAT_INTERVAL_MS = 15_000;
/** Rows of stopped processes are looked for about this often, not at every heartbeat. */
const SWEEP_EVERY_MS = 10 * 60_000;
/** Rows of processes not seen for this long are deleted (by any process's heartbeat). */
export const HEARTBEAT_KEEP_MS = 24 * 3_600_000;
/** A slow clamd must not hold the heartbeat back: it is written without what did not answer. */
const PROBE_TIMEOUT_MS = 5_000;

/** What a process is, fixed for its life. */
export interface NodeIdentity {
  role: string;
  version: string;
  ownSignaturesVersion: string;
}

/** What a heartbeat asks the process each round. */
export interface NodeProbe {
  /** Ends its connection when `signal` aborts, so no command outlives the heartbeat. */
  clamd(signal: AbortSignal): Promise<ClamdVersion>;
  /** The digest of every database clamd has loaded (throws while it loads them). */
  databasesVersion(): Promise<string>;
  /** Jobs this process runs now; null when it runs none (role api). */
  runningJobs(): number | null;
}

function within<T>(ms: number, work: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
  });
  return Promise.race([work, timeout]).finally(() => clearTimeout(timer));
}

/**
 * Writes this process's heartbeat to the store every HEARTBEAT_INTERVAL_MS (what it runs, its
 * clamd's and databases' versions), so the console's operations page shows every node from any
 * node; rows not seen for a day are removed on the way, every ten minutes or so. A failed round is logged and the next
 * one tries again. Stopping removes the row: a node that left cleanly is not shown as stale.
 */
export class NodeHeartbeat {
  /** Random per process (a pid is reused, on another host too). */
  readonly id = randomBytes(8).toString('hex');
  private readonly host = hostname().slice(0, 255);
  private readonly startedAt: number;
  private readonly task: PeriodicTask;
  /** Ends a probe under way when the heartbeat stops. */
  private readonly stopping = new AbortController();
  /** When this process last removed old rows (0: not yet; its first heartbeat does). */
  private sweptAt = 0;

  constructor(
    private readonly store: Store,
    private readonly identity: NodeIdentity,
    private readonly probe: NodeProbe,
    private readonly logger: Logger,
    intervalMs = HEARTBEAT_INTERVAL_MS,
    private readonly clock: () => number = Date.now,
  ) {
    this.startedAt = clock();
    this.task = new PeriodicTask(() => this.beat(), intervalMs, logger, 'writing the heartbeat');
  }

  /** Writes the first heartbeat (a failure is logged), then one per interval. */
  start(): Promise<void> {
    return this.task.start();
  }

  async stop(): Promise<void> {
    this.stopping.abort();
    await this.task.stop();
    await this.store.nodeHeartbeats.delete(this.id).catch((error: unknown) => {
      this.logger.warn({ err: error }, 'could not remove the heartbeat; it will show as stale');
    });
  }

  /** One heartbeat: this process's state now, and old rows removed. */
  async beat(): Promise<void> {
    const [clamd, databases] = await Promise.allSettled([
      // The probe's connection ends with the wait (or the heartbeat's stop): no command on a
      // clamd that does not answer outlives it.
      this.probe.clamd(
        AbortSignal.any([AbortSignal.timeout(PROBE_TIMEOUT_MS), this.stopping.signal]),
      ),
      within(PROBE_TIMEOUT_MS, this.probe.databasesVersion()),
    ]);
    const version = clamd.status === 'fulfilled' ? clamd.value : null;
    const now = this.clock();
    const node: NodeRecord = {
      id: this.id,
      host: this.host,
      pid: process.pid,
      role: this.identity.role,
      version: this.identity.version,
      clamdVersion: version?.engine ?? null,
      signaturesVersion: version?.databaseVersion ?? null,
      signaturesDate: version?.databaseDate?.toISOString() ?? null,
      ownSignaturesVersion: this.identity.ownSignaturesVersion,
      databasesVersion: databases.status === 'fulfilled' ? databases.value : null,
      runningJobs: this.probe.runningJobs(),
      startedAt: this.startedAt,
      lastSeenAt: now,
    };
    await this.store.nodeHeartbeats.write(node);
    if (now - this.sweptAt >= SWEEP_EVERY_MS) {
      await this.store.nodeHeartbeats.deleteSeenBefore(now - HEARTBEAT_KEEP_MS);
      this.sweptAt = now;
    }
  }
}
