import type { JobStage } from '../domain/records.js';
import type { WorkKind } from '../store/work-dispatch.js';

/**
 * Tells a job runner of jobs made due by the processes sharing its store (PostgreSQL: the NOTIFY
 * each due job's commit sends, WorkDispatch.signal), so that it looks at the due list at once
 * instead of at its next poll.
 */
export interface DueSignals {
  /** `listener` hears of each job of `accountId` made due in `stage` (its own ones too). */
  onDue(listener: (stage: JobStage, accountId: string) => void): void;
}

/**
 * Where callbacks are delivered from when the store does not hold their due list itself
 * (PostgreSQL: pg-boss). Each delivery names a row (a callback delivery); the handler
 * claims that row in the store, so a delivery that comes twice does the work once.
 */
export interface WorkDelivery {
  /**
   * Runs `handler` for each delivered id of `kind`: `slots` at once in this process, at most
   * `perAccount` of one account at once across every process. A handler that throws has its
   * delivery repeated later.
   */
  deliver(
    kind: WorkKind,
    options: { slots: number; perAccount: number },
    handler: (id: string) => Promise<void>,
  ): Promise<void>;
  /**
   * Work of `kind` was just committed by this process: its handlers here look at once, without
   * waiting for the database's notification (which another process relies on) or a poll.
   */
  wake(kind: WorkKind): void;
  /** Takes no more deliveries of `kind`; handlers running go on to their end. */
  stopDelivering(kind: WorkKind): Promise<void>;
}
