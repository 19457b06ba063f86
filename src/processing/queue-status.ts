import type { Store } from '../store/store.js';
import type { JobRunner } from './job-runner.js';

/** A worker's view of the async queue, for its readiness report. */
export interface QueueReport {
  /** Jobs any worker may claim now (due, or whose worker's lease ended). */
  due: number;
  /** Jobs this process is running. */
  running: number;
  /** How long the longest-waiting due job has been due; 0 when none is. */
  oldestDueSeconds: number;
}

export class QueueStatus {
  constructor(
    private readonly store: Store,
    private readonly runner: JobRunner,
  ) {}

  /**
   * What waits in the store, for the metrics: due jobs, the oldest due job's wait, and callback
   * deliveries pending. The same in every process on the store.
   */
  async backlog(): Promise<{ due: number; oldestDueSeconds: number; callbacksPending: number }> {
    const [{ due, oldestDueSeconds }, callbacksPending] = await Promise.all([
      this.report(),
      this.store.callbacks.pendingCount(),
    ]);
    return { due, oldestDueSeconds, callbacksPending };
  }

  /** Jobs this process is running now. */
  get running(): number {
    return this.runner.running;
  }

  async report(): Promise<QueueReport> {
    const now = Date.now();
    const { count, oldest } = await this.store.jobs.dueSummary(new Date(now).toISOString());
    return {
      due: count,
      running: this.runner.running,
      oldestDueSeconds:
        oldest === null ? 0 : Math.max(0, Math.round((now - Date.parse(oldest)) / 1000)),
    };
  }
}
