import { type ResourceLimits, Worker } from 'node:worker_threads';

/** Messages from a worker script written with `serveWorkerRequests` (worker-side.ts). */
export type WorkerReply<Result> =
  | { ready: true }
  | { startError: string }
  | { id: number; result: Result }
  | { id: number; error: string };

export interface WorkerPoolOptions {
  /** Used in error messages, e.g. 'nsfw-image'. */
  name: string;
  /** The worker script, relative to src/engines (dist/engines) and without extension. */
  script: string;
  size: number;
  /** Handed to every worker as `workerData`. */
  workerData?: unknown;
  /** e.g. a heap limit, so a job that would exhaust memory ends its worker, not the process. */
  resourceLimits?: ResourceLimits;
  /** How long a worker beyond the first stays without a request (IDLE_WORKER_MS; tests). */
  idleWorkerMs?: number;
  log?: (message: string) => void;
}

interface Job<Request, Result> {
  id: number;
  request: Request;
  transfer: ArrayBuffer[];
  signal: AbortSignal;
  resolve: (result: Result) => void;
  reject: (error: Error) => void;
  onAbort: () => void;
}

interface Slot<Request, Result> {
  worker: Worker;
  job: Job<Request, Result> | null;
  /** When it last finished a request (or started). */
  idleSince: number;
}

/** A worker beyond the first stops after this long without a request. */
export const IDLE_WORKER_MS = 60_000;

const FIRST_RESTART_DELAY_MS = 100;
const MAX_RESTART_DELAY_MS = 30_000;

function reasonText(reason: unknown): string {
  if (reason instanceof Error) return reason.name === 'TimeoutError' ? 'timed out' : reason.message;
  return reason === undefined ? 'aborted' : String(reason);
}

/**
 * A fixed number of worker threads answering one request at a time each, so CPU-heavy work
 * (inference, text extraction) never runs on the event loop. A request whose signal aborts is
 * rejected at once; if it was running, its worker is terminated and replaced, so a stuck job
 * cannot hold a worker. A worker that dies rejects its request and is replaced; a replacement that
 * cannot start is tried again with a growing pause.
 */
export class WorkerPool<Request, Result> {
  private readonly slots: Array<Slot<Request, Result>> = [];
  private readonly queue: Array<Job<Request, Result>> = [];
  private nextId = 0;
  /** Replacement workers still starting. */
  private starting = 0;
  private closed = false;

  private constructor(private readonly options: WorkerPoolOptions) {}

  /**
   * Starts one worker; fails with its start error (e.g. a missing model). More start as requests
   * queue behind busy workers, up to `size`, and those stop again after IDLE_WORKER_MS without a
   * request: a worker costs 20 MB (language) to 130 MB (images), and a server that sees one such
   * item now and then needs one, not one per CPU.
   */
  static async create<Request, Result>(
    options: WorkerPoolOptions,
  ): Promise<WorkerPool<Request, Result>> {
    const pool = new WorkerPool<Request, Result>(options);
    try {
      pool.slots.push({ worker: await pool.startWorker(), job: null, idleSince: Date.now() });
    } catch (error) {
      await pool.close();
      throw error;
    }
    return pool;
  }

  /** Workers running now (between 1 and the pool's size, while it is open). */
  get size(): number {
    return this.slots.length;
  }

  run(request: Request, signal: AbortSignal, transfer: ArrayBuffer[] = []): Promise<Result> {
    if (this.closed) return Promise.reject(new Error(`${this.options.name} is closed`));
    if (this.slots.length === 0 && this.starting === 0) {
      return Promise.reject(new Error(`${this.options.name} has no worker left`));
    }
    if (signal.aborted) {
      return Promise.reject(
        new Error(`${this.options.name} stopped: ${reasonText(signal.reason)}`),
      );
    }
    return new Promise<Result>((resolve, reject) => {
      const job: Job<Request, Result> = {
        id: this.nextId++,
        request,
        transfer,
        signal,
        resolve,
        reject,
        onAbort: () => this.abort(job),
      };
      signal.addEventListener('abort', job.onAbort, { once: true });
      this.queue.push(job);
      this.dispatch();
    });
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.idleTimer !== null) clearTimeout(this.idleTimer);
    for (const job of this.queue.splice(0))
      this.settle(job, new Error(`${this.options.name} closed`));
    const slots = this.slots.splice(0);
    for (const slot of slots) {
      if (slot.job) this.settle(slot.job, new Error(`${this.options.name} closed`));
    }
    await Promise.all(slots.map((slot) => slot.worker.terminate()));
  }

  private settle(job: Job<Request, Result>, outcome: Error | { result: Result }): void {
    job.signal.removeEventListener('abort', job.onAbort);
    if (outcome instanceof Error) job.reject(outcome);
    else job.resolve(outcome.result);
  }

  private dispatch(): void {
    for (const slot of this.slots) {
      if (slot.job !== null) continue;
      const job = this.queue.shift();
      if (job === undefined) return;
      slot.job = job;
      slot.worker.postMessage({ id: job.id, request: job.request }, job.transfer);
    }
    // Requests wait behind busy workers: one more worker for each, up to the pool's size.
    if (this.queue.length > this.starting && this.slots.length + this.starting < this.maxWorkers) {
      this.grow();
    }
  }

  private get maxWorkers(): number {
    return Math.max(1, this.options.size);
  }

  /** One more worker for waiting requests; a failed start is left to the next request's demand. */
  private grow(): void {
    this.starting++;
    this.startWorker().then(
      (worker) => {
        this.starting--;
        if (this.closed) {
          worker.terminate().catch(() => undefined);
          return;
        }
        this.slots.push({ worker, job: null, idleSince: Date.now() });
        this.scheduleIdleCheck();
        this.dispatch();
      },
      (error: Error) => {
        this.starting--;
        this.options.log?.(`${this.options.name} worker could not start: ${error.message}`);
        if (this.slots.length === 0 && this.starting === 0) {
          for (const job of this.queue.splice(0)) this.settle(job, error);
        }
      },
    );
  }

  private idleTimer: NodeJS.Timeout | null = null;

  /** Stops workers beyond the first that had no request for IDLE_WORKER_MS. */
  private scheduleIdleCheck(): void {
    if (this.idleTimer !== null || this.closed) return;
    const idleMs = this.options.idleWorkerMs ?? IDLE_WORKER_MS;
    this.idleTimer = setTimeout(() => {
      this.idleTimer = null;
      const now = Date.now();
      for (const slot of [...this.slots]) {
        if (this.slots.length <= 1) break;
        if (slot.job !== null || now - slot.idleSince < idleMs) continue;
        this.slots.splice(this.slots.indexOf(slot), 1);
        slot.worker.removeAllListeners('exit');
        slot.worker.terminate().catch(() => undefined);
      }
      if (this.slots.length > 1) this.scheduleIdleCheck();
    }, idleMs);
    this.idleTimer.unref();
  }

  private abort(job: Job<Request, Result>): void {
    const error = new Error(`${this.options.name} stopped: ${reasonText(job.signal.reason)}`);
    const queued = this.queue.indexOf(job);
    if (queued >= 0) {
      this.queue.splice(queued, 1);
      this.settle(job, error);
      return;
    }
    const slot = this.slots.find((candidate) => candidate.job === job);
    if (slot === undefined) return;
    this.settle(job, error);
    this.replace(slot, 'its request was stopped');
  }

  /** Terminates the slot's worker and starts another in its place (the slot stays busy till then). */
  private replace(slot: Slot<Request, Result>, why: string): void {
    const old = slot.worker;
    old.removeAllListeners('exit');
    old.terminate().catch(() => undefined);
    slot.job = null;
    const index = this.slots.indexOf(slot);
    if (index < 0 || this.closed) return;
    this.slots.splice(index, 1);
    this.options.log?.(`${this.options.name} worker replaced: ${why}`);
    this.restart();
  }

  /**
   * Starts a worker in place of one that is gone. A start that fails is tried again after a pause
   * (0.1 s, doubling up to 30 s) for as long as the pool is open, so a passing fault (a full disk,
   * memory pressure) never leaves the engine without workers for good.
   */
  private restart(failuresInARow = 0): void {
    this.starting++;
    this.startWorker().then(
      (worker) => {
        this.starting--;
        if (this.closed) {
          worker.terminate().catch(() => undefined);
          return;
        }
        this.slots.push({ worker, job: null, idleSince: Date.now() });
        this.dispatch();
      },
      (error: Error) => {
        const delayMs = Math.min(
          MAX_RESTART_DELAY_MS,
          FIRST_RESTART_DELAY_MS * 2 ** failuresInARow,
        );
        this.options.log?.(
          `${this.options.name} worker could not restart: ${error.message}; trying again in ${delayMs} ms`,
        );
        // With no worker running, queued requests would wait on a start that may never come.
        if (this.slots.length === 0) {
          for (const job of this.queue.splice(0)) this.settle(job, error);
        }
        setTimeout(() => {
          this.starting--;
          if (!this.closed) this.restart(failuresInARow + 1);
        }, delayMs).unref();
      },
    );
  }

  private startWorker(): Promise<Worker> {
    const worker = spawnWorker(this.options);
    return new Promise((resolve, reject) => {
      let started = false;
      let failure = '';
      worker.on('message', (reply: WorkerReply<Result>) => {
        if ('ready' in reply) {
          started = true;
          resolve(worker);
          return;
        }
        if ('startError' in reply) {
          worker.terminate().catch(() => undefined);
          reject(new Error(`${this.options.name} worker failed to start: ${reply.startError}`));
          return;
        }
        const slot = this.slots.find((candidate) => candidate.worker === worker);
        const job = slot?.job;
        if (slot === undefined || job === undefined || job === null || job.id !== reply.id) return;
        slot.job = null;
        slot.idleSince = Date.now();
        this.settle(
          job,
          'error' in reply ? new Error(`${this.options.name}: ${reply.error}`) : reply,
        );
        this.dispatch();
      });
      worker.on('error', (error) => {
        failure = error.message; // e.g. its heap limit reached; the exit follows
        if (!started) reject(new Error(`${this.options.name} worker failed: ${error.message}`));
        else this.options.log?.(`${this.options.name} worker failed: ${error.message}`);
      });
      worker.on('exit', (code) => {
        if (!started) {
          reject(new Error(`${this.options.name} worker exited (${code}) before it was ready`));
          return;
        }
        const slot = this.slots.find((candidate) => candidate.worker === worker);
        if (slot === undefined) return;
        const why = failure || `it exited (${code})`;
        if (slot.job)
          this.settle(slot.job, new Error(`${this.options.name} worker failed: ${why}`));
        this.replace(slot, why);
      });
    });
  }
}

/** The worker runs the compiled .js file; under tsx (tests, development) it registers tsx first. */
function spawnWorker({ script, workerData, resourceLimits }: WorkerPoolOptions): Worker {
  if (!import.meta.url.endsWith('.ts')) {
    return new Worker(new URL(`./${script}.js`, import.meta.url), { workerData, resourceLimits });
  }
  const entry = new URL(`./${script}.ts`, import.meta.url).href;
  const bootstrap = `import('tsx/esm/api').then((tsx) => { tsx.register(); return import(${JSON.stringify(entry)}); });`;
  return new Worker(bootstrap, { eval: true, workerData, resourceLimits });
}
