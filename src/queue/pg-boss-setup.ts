import { PgBoss } from 'pg-boss';
import type { PgBossDispatchOptions } from './pg-boss-dispatch.js';

/** pg-boss as Assay runs it: its pace, its pool, and none of the passes Assay has no use for. */
export function createPgBoss(options: PgBossDispatchOptions, schema: string): PgBoss {
  const monitorSeconds = options.monitorSeconds ?? 60;
  return new PgBoss({
    connectionString: options.connectionString,
    schema,
    max: options.poolSize ?? 4,
    application_name: 'assay-dispatch',
    connectionTimeoutMillis: 10_000,
    // Stale heartbeats are found by the supervisor's monitor pass: both timers set its pace.
    monitorIntervalSeconds: monitorSeconds,
    superviseIntervalSeconds: monitorSeconds,
    // The pollers listen for the NOTIFY of a committed send themselves (start()); pg-boss's own
    // listener would wake workers this process does not have.
    useListenNotify: false,
    supervise: options.supervise ?? true,
    // The LISTEN connection's own check that it still listens: a query a minute, not every 10 s.
    notifyHeartbeatIntervalMs: 60_000,
    // No flows (jobs that wait for others) here: their pass every 5 s only cost the database.
    flowIntervalSeconds: 3600,
    // pg-boss's registry of instances is informational (the nodes Assay shows are its own
    // heartbeats): refreshed every 2 minutes, not 30 s.
    instanceHeartbeatSeconds: 120,
    schedule: false,
    ...(options.instanceName === undefined ? {} : { instanceName: options.instanceName }),
  });
}

/** Creates the queues that are missing, and gives those there this process's settings. */
export async function ensureQueues(
  boss: PgBoss,
  names: readonly string[],
  timing: { heartbeatSeconds: number; expireInSeconds: number },
): Promise<void> {
  const existing = new Set((await boss.getQueues([...names])).map((q) => q.name));
  for (const name of names) {
    const settings = {
      heartbeatSeconds: timing.heartbeatSeconds,
      expireInSeconds: timing.expireInSeconds,
      // The store counts attempts and gives up; pg-boss's retries only re-deliver.
      retryLimit: 1_000_000,
      retryDelay: 1,
      retryBackoff: true,
      retryDelayMax: 60,
      // A waiting message is never dropped for age; finished ones (pg-boss's rows only) go
      // after a day.
      retentionSeconds: 10 * 365 * 24 * 3600,
      deleteAfterSeconds: 24 * 3600,
      notify: true,
    };
    // An existing queue takes this process's settings (for messages sent from now on).
    if (existing.has(name)) {
      await boss.updateQueue(name, settings);
      continue;
    }
    try {
      // One waiting message per id and queue (see enqueue); an active one may have a successor.
      await boss.createQueue(name, { policy: 'short', ...settings });
    } catch (error) {
      // Another process created it since getQueues: that is the idempotence wanted.
      if ((await boss.getQueue(name)) === null) throw error;
    }
  }
}
