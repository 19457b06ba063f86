/** Small statistics helpers for benchmark reports. */

export function percentile(sortedMs: number[], p: number): number {
  if (sortedMs.length === 0) return Number.NaN;
  const index = Math.min(sortedMs.length - 1, Math.ceil((p / 100) * sortedMs.length) - 1);
  return sortedMs[Math.max(0, index)] ?? Number.NaN;
}

export function median(values: number[]): number {
  return percentile(
    [...values].sort((a, b) => a - b),
    50,
  );
}

export interface RunStats {
  count: number;
  seconds: number;
  perSecond: number;
  mbPerSecond: number;
  p50: number;
  p99: number;
}

export function summarise(latenciesMs: number[], seconds: number, bytesEach: number): RunStats {
  const sorted = [...latenciesMs].sort((a, b) => a - b);
  return {
    count: sorted.length,
    seconds,
    perSecond: sorted.length / seconds,
    mbPerSecond: (sorted.length * bytesEach) / (1024 * 1024) / seconds,
    p50: percentile(sorted, 50),
    p99: percentile(sorted, 99),
  };
}

/** Runs `task` `total` times with at most `concurrency` at once; returns per-task latencies (ms). */
export async function runConcurrently(
  total: number,
  concurrency: number,
  task: (index: number) => Promise<void>,
): Promise<{ latencies: number[]; seconds: number }> {
  const latencies: number[] = [];
  let next = 0;
  const started = performance.now();
  const worker = async () => {
    while (next < total) {
      const index = next++;
      const t0 = performance.now();
      await task(index);
      latencies.push(performance.now() - t0);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  return { latencies, seconds: (performance.now() - started) / 1000 };
}
