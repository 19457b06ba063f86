import type { Job } from '../domain/records.js';

/**
 * Where accepted work goes: committed durably with its first trace line and the item's credit,
 * or not at all (BalanceSpentError when the balance is spent). The embedded queue is the `jobs`
 * table with leases (JobRunner); PostgreSQL deployments dispatch through pg-boss (issue 11).
 */
export interface JobQueue {
  submit(job: Job, received: string): Promise<void>;
}
