import type { Kysely, RawBuilder } from 'kysely';
import { type Db, fromKysely, type PgBoss } from 'pg-boss';
import { notifyChannelSql } from 'pg-boss/dist/plans.js';
import type { Logger } from 'pino';
import type { JobStage } from '../domain/records.js';
import type { DueSignals, WorkDelivery } from '../processing/work-delivery.js';
import type { Database } from '../store/schema.js';
import type { DueJob, DueWork, WorkDispatch, WorkKind } from '../store/work-dispatch.js';
import { GroupFetches, type Message } from './group-fetches.js';
import { JobSignals } from './job-signals.js';
import { MessageQueries, type QueueCounts } from './message-queries.js';
import { createPgBoss, ensureQueues } from './pg-boss-setup.js';
import { QueuePoller } from './queue-poller.js';

/**
 * The queues the service dispatches on PostgreSQL. Jobs have none: every worker claims them from
 * the store's due list (FairClaims), woken by the signal their commit sends (`signal`).
 */
export const ASSAY_QUEUES = ['assay.callback'] as const;

export interface PgBossDispatchOptions {
  /** The store's database (`ASSAY_DATABASE_URL`): pg-boss keeps its tables in `schema` there. */
  connectionString: string;
  /** Default 'pgboss'. */
  schema?: string;
  /** The queues created at start (idempotently). Default ASSAY_QUEUES. */
  queues?: readonly string[];
  /** pg-boss's own pool, apart from the store's. Default 4. */
  poolSize?: number;
  /**
   * A message whose worker has not refreshed its heartbeat for this long is failed and re-delivered.
   * Default 30 (pg-boss's minimum is 10); workers refresh every half of it.
   */
  heartbeatSeconds?: number;
  /**
   * The longest a message may stay active, heartbeat or not: above the longest legitimate
   * callback attempt. Default 900.
   */
  expireInSeconds?: number;
  /**
   * How often some instance looks for stale heartbeats and expired jobs (one instance per pass,
   * claimed in the database; a pass is about 25 statements). Default 60: the messages of a process
   * that died count in their account's group until then.
   */
  monitorSeconds?: number;
  /**
   * How often an idle queue is fetched from anyway, besides LISTEN/NOTIFY wake-ups and this
   * process's own deferred and failed messages falling due: what only polling finds is another
   * process's deferred message that its sender did not take (it died, or its slots were full), and
   * messages a dead process held. Default 30.
   */
  pollSeconds?: number;
  /** Whether this instance runs pg-boss's monitor and maintenance (a worker's). Default true. */
  supervise?: boolean;
  /** Registry name of this instance (getInstances), e.g. 'worker'. */
  instanceName?: string;
  logger: Logger;
}

export interface WorkOptions {
  /** Jobs of this queue this process runs at once. */
  slots: number;
  /** Jobs of one group (account) running at once, across every process on the database. */
  perGroup: number;
}

/** Counts of one queue, live: for a worker's readiness report. */

/** The queue each kind of work is dispatched on. */
export function queueOf(kind: WorkKind): string {
  return `assay.${kind}`;
}

/**
 * Delivery of work through pg-boss on the store's PostgreSQL database. pg-boss holds only the
 * delivery (which id to work on next, who holds it, its heartbeat); the record of the work (its
 * attempts, spool key, credit, outcome) stays in the store. A message is sent in the caller's
 * transaction, so it exists exactly when the row it is for was committed. Delivery is at least
 * once: a worker that dies mid-job leaves it to be re-delivered once its heartbeat is stale
 * (heartbeatSeconds + twice monitorSeconds + 1 s + pollSeconds; docs/ARCHITECTURE.md), so
 * handlers must be idempotent, which the store's claim of the row provides.
 */
export class PgBossDispatch implements WorkDispatch, WorkDelivery, DueSignals {
  private readonly boss: PgBoss;
  /** This process's poller of each queue it works on. */
  private readonly pollers = new Map<string, QueuePoller>();
  /** The LISTEN for committed sends (a connection of its own), closed at stop. */
  private listener: { close(): Promise<void> } | null = null;
  /** The signals of due jobs, on the same LISTEN connection. */
  private readonly jobSignals: JobSignals;
  /** Per queue, a wake-up at the earliest deferred message this process sent. */
  private readonly wakeUps = new Map<string, { at: number; timer: NodeJS.Timeout }>();
  private readonly queues: readonly string[];
  private readonly heartbeatSeconds: number;
  private readonly expireInSeconds: number;
  private readonly pollSeconds: number;
  private readonly schema: string;
  private readonly messages: MessageQueries;
  private readonly logger: Logger;
  private readonly fetches: GroupFetches;

  constructor(options: PgBossDispatchOptions) {
    this.queues = options.queues ?? ASSAY_QUEUES;
    this.heartbeatSeconds = options.heartbeatSeconds ?? 30;
    this.expireInSeconds = options.expireInSeconds ?? 900;
    this.pollSeconds = options.pollSeconds ?? 30;
    this.schema = options.schema ?? 'pgboss';
    this.logger = options.logger;
    if (!/^[a-z_][a-z0-9_]*$/.test(this.schema)) {
      throw new Error(`pg-boss schema must be a plain lower-case identifier: ${this.schema}`);
    }
    if (this.heartbeatSeconds < 10) throw new Error('heartbeatSeconds must be at least 10');
    if (this.expireInSeconds <= this.heartbeatSeconds) {
      throw new Error('expireInSeconds must be above heartbeatSeconds');
    }
    this.boss = createPgBoss(options, this.schema);
    this.fetches = new GroupFetches(this.boss, this.schema);
    this.jobSignals = new JobSignals(this.schema);
    this.messages = new MessageQueries(this.boss, this.schema);
    // pg-boss reports failed polls, heartbeats and maintenance here; unhandled, an 'error' event
    // would end the process. Each is logged; pg-boss keeps polling and recovers when the database
    // is back.
    this.boss.on('error', (error) => this.logger.error({ err: error }, 'pg-boss error'));
    this.boss.on('warning', (warning) =>
      this.logger.warn({ data: warning.data }, `pg-boss: ${warning.message}`),
    );
  }

  /** Installs or migrates pg-boss's schema and creates the queues that are missing. */
  async start(): Promise<void> {
    await this.boss.start();
    await ensureQueues(this.boss, this.queues, {
      heartbeatSeconds: this.heartbeatSeconds,
      expireInSeconds: this.expireInSeconds,
    });
    await this.listen();
  }

  /**
   * Wakes this process's poller of a queue when a send to it commits (pg-boss's NOTIFY, the queue
   * its payload), on a connection of its own that pg-boss keeps alive and re-establishes (then
   * every poller fetches, for what was missed). Without it, polling alone delivers.
   */
  private async listen(): Promise<void> {
    const db = this.boss.getDb() as Db & {
      listen?: (
        channel: string,
        onNotification: (payload: string) => void,
        onReconnect: () => void,
      ) => Promise<{ close(): Promise<void> }>;
    };
    if (typeof db.listen !== 'function') {
      this.logger.warn('pg-boss cannot listen here: work is found by polling only');
      return;
    }
    try {
      const { rows } = await db.executeSql(`SELECT ${notifyChannelSql(this.schema)} AS channel`);
      const channel = String((rows[0] as { channel: string }).channel);
      this.listener = await db.listen(
        channel,
        (payload) => {
          if (!this.jobSignals.heard(payload)) this.pollers.get(payload)?.wake();
        },
        () => {
          // What was sent or signalled while the connection was down is looked for.
          for (const poller of this.pollers.values()) poller.wake();
          this.jobSignals.missed();
        },
      );
    } catch (error) {
      this.logger.warn({ err: error }, 'LISTEN failed: work is found by polling only');
    }
  }

  /** DueSignals: `listener` hears of every job signalled due (`signal`), from any process. */
  onDue(listener: (stage: JobStage, accountId: string) => void): void {
    this.jobSignals.onDue(listener);
  }

  /** WorkDispatch: wakes the job runners of every process (`onDue`) when `db` commits. */
  signal(db: Kysely<Database>, due: DueJob): Promise<void> {
    return this.jobSignals.send(db, [due]);
  }

  /** WorkDispatch: `signal` for several jobs, as a query for a statement of the store's own. */
  signalQuery(dues: readonly DueJob[]): RawBuilder<{ signalled: unknown }> {
    return this.jobSignals.query(dues);
  }

  /**
   * Sends `{ id: jobId }` to `queue` inside `trx`, the transaction that commits the row it is for:
   * a rollback drops the message too. False when a message for this id is already waiting in this
   * queue (it is not queued twice); one being worked on does not count, so a handler may queue its
   * own job's next run.
   */
  async enqueue(
    trx: Kysely<Database>,
    queue: string,
    jobId: string,
    options: { group: string; startAfter?: Date; priority?: number },
  ): Promise<boolean> {
    const sent = await this.boss.send(queue, { id: jobId } satisfies Message, {
      db: fromKysely(trx),
      singletonKey: jobId,
      group: { id: options.group },
      ...(options.priority === undefined ? {} : { priority: options.priority }),
      ...(options.startAfter === undefined ? {} : { startAfter: options.startAfter }),
    });
    return sent !== null;
  }

  /**
   * Runs `handler` for each message of `queue`, `slots` at once in this process and `perGroup` of
   * one group at once across every process, through one poller (QueuePoller): one fetch for the
   * free slots, one completion for the messages that finished together, one heartbeat statement
   * for those running. Resolving completes the message; throwing fails it, and it is re-delivered
   * after a short backoff. `signal` aborts when the message is taken away at stop.
   */
  async work(
    queue: string,
    options: WorkOptions,
    handler: (jobId: string, signal: AbortSignal) => Promise<void>,
  ): Promise<void> {
    if (this.pollers.has(queue)) throw new Error(`${queue} is worked on already`);
    const poller = new QueuePoller(
      this.boss,
      this.fetches,
      queue,
      {
        slots: options.slots,
        perGroup: options.perGroup,
        pollMs: this.pollSeconds * 1000,
        heartbeatMs: (this.heartbeatSeconds * 1000) / 2,
      },
      handler,
      this.logger,
    );
    this.pollers.set(queue, poller);
    poller.start();
  }

  /** WorkDispatch: a message for a row that became due, in the transaction that wrote it. */
  async send(db: Kysely<Database>, work: DueWork): Promise<void> {
    const queue = queueOf(work.kind);
    const at = Date.parse(work.at);
    const deferred = at > Date.now();
    const options = {
      group: work.accountId,
      // pg-boss takes the highest priority first, then the oldest.
      priority: -(work.rank ?? 0),
      ...(deferred ? { startAfter: new Date(at) } : {}),
    };
    if (work.sooner === true) {
      // The waiting message (one per id) is moved to `at`; without one, it is sent.
      await this.boss.upsert(queue, { id: work.id } satisfies Message, {
        db: fromKysely(db),
        singletonKey: work.id,
        group: { id: options.group },
        priority: options.priority,
        startAfter: new Date(at),
      });
    } else {
      await this.enqueue(db, queue, work.id, options);
    }
    // A deferred message sends no NOTIFY: this process's workers are woken when it falls due
    // (others find it at their next poll). A wake-up before the commit finds nothing; harmless.
    if (deferred) this.wakeAt(queue, at);
  }

  /** WorkDispatch: the rows of `ids` with a message waiting (created or to be retried) in `kind`'s queue. */
  waiting(db: Kysely<Database>, kind: WorkKind, ids: string[]): Promise<Set<string>> {
    return this.messages.waitingRows(db, queueOf(kind), ids);
  }

  /** WorkDelivery: runs `handler` for each row of `kind` delivered. */
  async deliver(
    kind: WorkKind,
    options: { slots: number; perAccount: number },
    handler: (id: string) => Promise<void>,
  ): Promise<void> {
    await this.work(queueOf(kind), { slots: options.slots, perGroup: options.perAccount }, (id) =>
      handler(id),
    );
  }

  /** WorkDelivery: this process's poller of `kind` fetches now. */
  wake(kind: WorkKind): void {
    this.pollers.get(queueOf(kind))?.wake();
  }

  /** WorkDelivery: fetches no more of `kind`; handlers running go on to their end (see stop). */
  async stopDelivering(kind: WorkKind): Promise<void> {
    this.pollers.get(queueOf(kind))?.stopFetching();
  }

  private wakeAt(queue: string, at: number): void {
    const current = this.wakeUps.get(queue);
    if (current !== undefined && current.at <= at) return;
    if (current !== undefined) clearTimeout(current.timer);
    // pg-boss compares start_after with the database's clock: a little after, not before.
    const timer = setTimeout(
      () => {
        this.wakeUps.delete(queue);
        this.pollers.get(queue)?.wake();
      },
      Math.max(0, at - Date.now()) + 20,
    );
    timer.unref();
    this.wakeUps.set(queue, { at, timer });
  }

  /** Live counts per queue (MessageQueries.counts). */
  queueStats(): Promise<Record<string, QueueCounts>> {
    return this.messages.counts(this.queues);
  }

  /**
   * Stops fetching and waits up to `graceMs` for running handlers; the messages of those still
   * running are then failed, so they are re-delivered (after the retry delay) to another process.
   */
  async stop(graceMs: number): Promise<void> {
    for (const { timer } of this.wakeUps.values()) clearTimeout(timer);
    this.wakeUps.clear();
    await Promise.all([...this.pollers.values()].map((poller) => poller.stop(graceMs)));
    this.pollers.clear();
    await this.listener?.close().catch(() => {});
    this.listener = null;
    await this.boss.stop({ graceful: graceMs > 0, timeout: Math.max(graceMs, 1), close: true });
  }
}
