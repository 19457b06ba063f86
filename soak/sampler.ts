/**
 * What the soak samples every few seconds, per Assay process: RSS and open descriptors (from
 * /proc), V8 heap and event-loop lag (its /metrics); and for the deployment: the queue's due jobs
 * and pending callbacks, the spool's files and bytes, the database's size.
 */
import { type Dirent, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';

export interface ProcessSample {
  name: string;
  rssMb: number;
  fds: number;
  heapMb: number;
  loopLagMs: number;
}

export interface Sample {
  at: number;
  processes: ProcessSample[];
  jobsDue: number;
  callbacksPending: number;
  spoolFiles: number;
  spoolMb: number;
  databaseMb: number;
}

export interface Sampled {
  name: string;
  pid: () => number | undefined;
  url: () => string;
}

function procRssMb(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0);
  return kb / 1024;
}

/** One metric's value (summed over its labels) from a Prometheus text page. */
export function metricValue(page: string, name: string): number {
  let sum = 0;
  for (const line of page.split('\n')) {
    if (!line.startsWith(name)) continue;
    const rest = line.slice(name.length);
    if (rest[0] !== ' ' && rest[0] !== '{') continue;
    const value = Number(line.slice(line.lastIndexOf(' ') + 1));
    if (Number.isFinite(value)) sum += value;
  }
  return sum;
}

/** Files under `dir` and their bytes (a spool directory). */
export function spoolUsage(dir: string): { files: number; bytes: number } {
  let files = 0;
  let bytes = 0;
  const walk = (path: string) => {
    let entries: Dirent[];
    try {
      entries = readdirSync(path, { withFileTypes: true });
    } catch {
      return;
    }
    for (const entry of entries) {
      const child = join(path, entry.name);
      if (entry.isDirectory()) walk(child);
      else {
        files += 1;
        try {
          bytes += statSync(child).size;
        } catch {
          // removed meanwhile
        }
      }
    }
  };
  walk(dir);
  return { files, bytes };
}

export async function takeSample(
  processes: Sampled[],
  spoolUsage: () => Promise<{ files: number; bytes: number }>,
  databaseBytes: () => Promise<number>,
): Promise<Sample> {
  const sample: Sample = {
    at: Date.now(),
    processes: [],
    jobsDue: 0,
    callbacksPending: 0,
    spoolFiles: 0,
    spoolMb: 0,
    databaseMb: 0,
  };
  let queueRead = false;
  for (const process of processes) {
    const pid = process.pid();
    const entry: ProcessSample = { name: process.name, rssMb: 0, fds: 0, heapMb: 0, loopLagMs: 0 };
    if (pid !== undefined) {
      try {
        entry.rssMb = procRssMb(pid);
        entry.fds = readdirSync(`/proc/${pid}/fd`).length;
      } catch {
        // the process is gone (chaos killed it): zeros
      }
    }
    try {
      const page = await (
        await fetch(`${process.url()}/metrics`, { signal: AbortSignal.timeout(2000) })
      ).text();
      entry.heapMb = metricValue(page, 'nodejs_heap_size_used_bytes') / (1024 * 1024);
      entry.loopLagMs = metricValue(page, 'nodejs_eventloop_lag_p99_seconds') * 1000;
      // The store's counts are the same from every process: read once.
      if (!queueRead) {
        sample.jobsDue = metricValue(page, 'assay_jobs_due');
        sample.callbacksPending = metricValue(page, 'assay_callbacks_pending');
        queueRead = true;
      }
    } catch {
      // not answering now
    }
    sample.processes.push(entry);
  }
  const spool = await spoolUsage().catch(() => ({ files: 0, bytes: 0 }));
  sample.spoolFiles = spool.files;
  sample.spoolMb = spool.bytes / (1024 * 1024);
  sample.databaseMb = (await databaseBytes().catch(() => 0)) / (1024 * 1024);
  return sample;
}
