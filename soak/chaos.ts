/**
 * `--chaos`: every minute or so one fault, in turn: clamd killed (its supervisor starts it again),
 * an api process and a worker SIGKILLed and started again on their ports (the one process, when
 * embedded), PostgreSQL restarted (scale-out; the machine's PostgreSQL: needs root), the callback
 * receiver hanging for 30 s. For each, how long until the deployment answered again: every process
 * ready and an upload scanned.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { postgresCtl } from '../bench/local-parts.js';
import { uploadForm } from '../test/helpers/content.js';

export interface FaultRecord {
  name: string;
  startedAt: number;
  /** When the fault was over (the part back, or its restart begun). */
  endedAt: number;
  /** From the fault's end until every process was ready and an upload was scanned; -1: never. */
  recoverMs: number;
}

export interface Fault {
  name: string;
  /** It kills processes: their clients get no answer until they are back. */
  killsProcesses: boolean;
  /** Brings the fault about and ends it; resolves when it is over. */
  run(): Promise<void>;
  /** What recovery means beyond ready processes and a scanned upload (the backlog drained). */
  settled?: () => Promise<boolean>;
}

export interface ChaosTargets {
  /** Every process's base URL (ready checks), and an api URL with its authorization (probe). */
  urls: () => string[];
  apiUrl: () => string;
  auth: string;
}

async function recovered(
  targets: ChaosTargets,
  timeoutMs: number,
  settled: () => Promise<boolean>,
): Promise<number> {
  const started = Date.now();
  while (Date.now() - started < timeoutMs) {
    const ready = await Promise.all(
      targets.urls().map((url) =>
        fetch(`${url}/health/ready`, { signal: AbortSignal.timeout(2000) })
          .then(async (r) => {
            await r.arrayBuffer();
            return r.status === 200;
          })
          .catch(() => false),
      ),
    );
    if (ready.every(Boolean)) {
      const probe = await fetch(`${targets.apiUrl()}/v2.2/files`, {
        method: 'POST',
        headers: { authorization: targets.auth },
        body: uploadForm(Buffer.from('chaos probe')),
        signal: AbortSignal.timeout(10_000),
      }).catch(() => null);
      await probe?.arrayBuffer();
      if (probe?.status === 201 && (await settled().catch(() => false))) {
        return Date.now() - started;
      }
    }
    await sleep(250);
  }
  return -1;
}

/** Runs the faults in turn, one every `intervalMs`, until `stopped()`. */
export async function runChaos(
  faults: Fault[],
  targets: ChaosTargets,
  intervalMs: number,
  stopped: () => boolean,
  records: FaultRecord[],
  log: (line: string) => void,
  active: { name: string | null; killsProcesses: boolean },
): Promise<void> {
  if (faults.length === 0) return;
  for (let i = 0; !stopped(); i++) {
    await sleep(intervalMs / 2);
    if (stopped()) break;
    const fault = faults[i % faults.length] as Fault;
    const startedAt = Date.now();
    log(`chaos: ${fault.name}`);
    active.name = fault.name;
    active.killsProcesses = fault.killsProcesses;
    try {
      await fault.run();
    } catch (error) {
      log(`chaos: ${fault.name} could not be brought about: ${String(error)}`);
    }
    const endedAt = Date.now();
    const recoverMs = await recovered(targets, 180_000, fault.settled ?? (async () => true));
    active.name = null;
    active.killsProcesses = false;
    records.push({ name: fault.name, startedAt, endedAt, recoverMs });
    log(`chaos: ${fault.name}: recovered ${recoverMs < 0 ? 'never' : `in ${recoverMs} ms`}`);
    await sleep(intervalMs / 2);
  }
}

/** Stops PostgreSQL (fast), waits `downMs`, starts it again: the machine's cluster, as root. */
export function restartPostgres(downMs: number): Fault {
  return {
    name: `PostgreSQL stopped for ${downMs / 1000} s`,
    killsProcesses: false,
    async run() {
      postgresCtl('stop');
      try {
        await sleep(downMs);
      } finally {
        postgresCtl('start');
      }
    },
  };
}
