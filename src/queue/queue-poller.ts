import type { Job, PgBoss } from 'pg-boss';
import type { Logger } from 'pino';
import type { Fetched, GroupFetches, Message } from './group-fetches.js';

/** The longest a freed slot waits for others to free up before it is fetched for. */
const FETCH_GATHER_MS = 5;

/** A failed message is retried by pg-boss after its first retry delay (1 s): looked for then. */
const FAILED_RETRY_LOOK_MS = 1_100;

export interface QueuePollerOptions {
  /** Messages of the queue this process handles at once. */
  slots: number;
  /** Messages of one group (account) active at once, across every process on the database. */
  perGroup: number;
  /** How often an idle poller fetches anyway (deferred and retried messages send no NOTIFY). */
  pollMs: number;
  /** How often the running messages' heartbeats are refreshed (in one statement). */
  heartbeatMs: number;
}

/**
 * One poller per queue and process (issue 28: one pg-boss worker per slot polled the database
 * 28 times a second in an idle worker). It fetches as many messages as it has free slots in one
 * statement, runs each one's handler, completes the finished ones together, and refreshes the
 * running ones' heartbeats together. It fetches when woken (a NOTIFY of a committed send, this
 * process's own send or deferred message falling due, a slot freed while work was left), and
 * otherwise every `pollMs`.
 *
 * A handler that resolves completes its message; one that throws fails it, and pg-boss delivers it
 * again after its retry delay. At stop, messages still running after the grace are failed, so
 * another process takes them at once.
 */
export class QueuePoller {
  private readonly running = new Map<string, Job<Message>>();
  /** Aborted when the message is taken away: at stop, once the grace is over. */
  private readonly signals = new Map<string, AbortController>();
  private readonly handlers = new Set<Promise<void>>();
  private readonly finished: Job<Message>[] = [];
  private fetching = false;
  /** Woken while a fetch ran or with no slot free: fetch again when possible. */
  private wanted = false;
  /**
   * A slot freeing up fetches again: the last fetch found work (more may wait), or came while this
   * process ran messages, whose groups may have been at their cap (pg-boss leaves a capped group's
   * messages out, so an empty fetch does not say the queue is empty: a fresh message of the group
   * would otherwise wait for the next wake-up). After an empty fetch with nothing running, only a
   * wake-up or the poll fetches.
   */
  private fetchWhenSettled = false;
  private stopped = false;
  private pollTimer: NodeJS.Timeout | undefined;
  /** When the queue's next deferred message falls due, as the last empty fetch saw it. */
  private deferredAt: number | null = null;
  /** A look for messages of this process that failed, when pg-boss retries them. */
  private retryLook: NodeJS.Timeout | undefined;
  private heartbeatTimer: NodeJS.Timeout | undefined;
  private settling: Promise<void> = Promise.resolve();
  /** A fetch for slots freed while others still run, gathering more (wakeGathered). */
  private gatherTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly boss: PgBoss,
    private readonly fetches: GroupFetches,
    private readonly queue: string,
    private readonly options: QueuePollerOptions,
    private readonly handler: (id: string, signal: AbortSignal) => Promise<void>,
    private readonly logger: Logger,
  ) {}

  start(): void {
    this.heartbeatTimer = setInterval(() => void this.touchRunning(), this.options.heartbeatMs);
    this.heartbeatTimer.unref();
    this.wake();
  }

  /** Fetches now (or as soon as a fetch under way ends and a slot is free). */
  wake(): void {
    if (this.stopped) return;
    this.wanted = true;
    if (!this.fetching && this.running.size < this.options.slots) void this.fetch();
  }

  /**
   * Fetches for slots that freed up: at once when half of them are free (or all), else after
   * FETCH_GATHER_MS, so that messages finishing one after another are completed, and the next ones
   * fetched and claimed, several to a transaction instead of one each (issue 28).
   */
  private wakeGathered(): void {
    const free = this.options.slots - this.running.size;
    if (free * 2 >= this.options.slots || this.running.size === 0) {
      clearTimeout(this.gatherTimer);
      this.gatherTimer = undefined;
      this.wake();
      return;
    }
    if (this.gatherTimer !== undefined) return;
    this.gatherTimer = setTimeout(() => {
      this.gatherTimer = undefined;
      this.wake();
    }, FETCH_GATHER_MS);
    this.gatherTimer.unref();
  }

  private async fetch(): Promise<void> {
    this.fetching = true;
    clearTimeout(this.pollTimer);
    try {
      while (this.wanted && !this.stopped) {
        this.wanted = false;
        // Finished messages are completed first: their groups' counts are then right.
        await this.settling;
        const free = this.options.slots - this.running.size;
        if (free <= 0) {
          // A slot freeing up fetches again.
          this.wanted = true;
          break;
        }
        // Completed with the fetch, in its transaction.
        const finished = this.finished.splice(0);
        let fetched: Fetched;
        try {
          fetched = await this.fetches.fetch(
            this.queue,
            {
              batchSize: free,
              groupConcurrency: this.options.perGroup,
              lookDeferred: this.running.size === 0,
            },
            finished,
          );
        } catch (error) {
          // Completed on their own, then (or left to their heartbeat if that fails too).
          this.finished.unshift(...finished);
          this.settling = this.settling.then(() => this.completeFinished());
          throw error;
        }
        const { jobs } = fetched;
        this.deferredAt = fetched.nextDeferredAt;
        this.fetchWhenSettled = jobs.length > 0 || this.running.size > 0;
        for (const job of jobs) this.launch(job);
        // A full fetch may have left more: look again once a slot frees (or now, if one is free).
        if (jobs.length >= free) this.wanted = true;
      }
    } catch (error) {
      this.logger.warn({ err: error, queue: this.queue }, 'fetching work failed; trying again');
      this.wanted = false;
      this.schedulePoll(1000);
      this.fetching = false;
      return;
    }
    this.fetching = false;
    const untilDeferred = this.deferredAt === null ? Infinity : this.deferredAt - Date.now() + 20;
    this.schedulePoll(Math.max(0, Math.min(this.options.pollMs, untilDeferred)));
  }

  private schedulePoll(ms: number): void {
    if (this.stopped) return;
    clearTimeout(this.pollTimer);
    this.pollTimer = setTimeout(() => this.wake(), ms);
    this.pollTimer.unref();
  }

  private launch(job: Job<Message>): void {
    this.running.set(job.id, job);
    const controller = new AbortController();
    this.signals.set(job.id, controller);
    const run = this.handler(job.data.id, controller.signal).then(
      () => this.settled(job, null),
      (error: unknown) => this.settled(job, error),
    );
    this.handlers.add(run);
    void run.finally(() => this.handlers.delete(run));
  }

  private settled(job: Job<Message>, error: unknown): void {
    this.signals.delete(job.id);
    if (!this.running.delete(job.id)) return; // failed at stop already
    const fetchNext = !this.stopped && (this.fetchWhenSettled || this.wanted);
    if (error === null) {
      this.finished.push(job);
      // Completed with the next fetch when one follows, else at once.
      if (!fetchNext) this.settling = this.settling.then(() => this.completeFinished());
    } else {
      this.logger.warn(
        { err: error, queue: this.queue },
        'dispatch handler failed; redelivered later',
      );
      this.settling = this.settling.then(() => this.fail([job], error));
      // pg-boss retries it after a second (no NOTIFY for a retry): this process looks then.
      if (this.retryLook === undefined && !this.stopped) {
        this.retryLook = setTimeout(() => {
          this.retryLook = undefined;
          this.wake();
        }, FAILED_RETRY_LOOK_MS);
        this.retryLook.unref();
      }
    }
    // A slot is free (and maybe a group's share): fetch if the last fetch says so, or if asked.
    if (fetchNext) this.wakeGathered();
  }

  /** Completes every message finished since the last call, in one statement. */
  private async completeFinished(): Promise<void> {
    const jobs = this.finished.splice(0);
    if (jobs.length === 0) return;
    try {
      await this.boss.complete(this.queue, jobs);
    } catch (error) {
      // Left active: its heartbeat goes stale and pg-boss delivers it again; the row's claim in
      // the store then finds the work done, and ends it.
      this.logger.warn({ err: error, queue: this.queue }, 'could not complete messages');
    }
  }

  private async fail(jobs: Job<Message>[], error: unknown): Promise<void> {
    if (jobs.length === 0) return;
    try {
      await this.boss.fail(this.queue, jobs, {
        message: error instanceof Error ? error.message : String(error),
      });
    } catch (failure) {
      this.logger.warn({ err: failure, queue: this.queue }, 'could not fail messages');
    }
  }

  /** Keeps the running messages active: one statement for all of them. */
  private async touchRunning(): Promise<void> {
    const jobs = [...this.running.values()];
    if (jobs.length === 0) return;
    try {
      await this.boss.touch(this.queue, jobs);
    } catch (error) {
      this.logger.warn({ err: error, queue: this.queue }, 'could not refresh heartbeats');
    }
  }

  /** Fetches no more; running handlers go on (wait for them with `stop`). */
  stopFetching(): void {
    this.stopped = true;
    clearTimeout(this.pollTimer);
    clearTimeout(this.gatherTimer);
    clearTimeout(this.retryLook);
  }

  /**
   * Fetches no more and waits up to `graceMs` for running handlers; the messages of those still
   * running then are failed, so another process takes them at once.
   */
  async stop(graceMs: number): Promise<void> {
    this.stopFetching();
    let timer: NodeJS.Timeout | undefined;
    const grace = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, graceMs);
    });
    await Promise.race([Promise.all([...this.handlers]), grace]);
    clearTimeout(timer);
    clearInterval(this.heartbeatTimer);
    const left = [...this.running.values()];
    this.running.clear();
    for (const controller of this.signals.values()) controller.abort();
    this.signals.clear();
    await this.settling;
    await this.completeFinished();
    await this.fail(left, new Error('the process stopped before the work ended'));
  }

  /** Messages running in this process now. */
  get active(): number {
    return this.running.size;
  }
}
