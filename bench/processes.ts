/**
 * Synchronous 4 KB uploads with `serve --processes 1` and `--processes 2` (BENCH_PROCESSES, e.g.
 * "1,2,4"), one service after the other on the same clamd, each with a fresh data dir and the
 * store the bench is given (SQLite, or ASSAY_DATABASE_URL from the environment). CPU is the
 * primary's and its children's together.
 */
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { cpuSeconds, memoryOf, startAssay } from './service-process.js';
import { runConcurrently, summarise } from './stats.js';
import { tagContent } from './unique-content.js';

/** The pids of a process's children (the cluster's processes), from /proc. */
function childrenOf(pid: number): number[] {
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8')
      .trim()
      .split(/\s+/)
      .filter(Boolean)
      .map(Number);
  } catch {
    return [];
  }
}

export async function benchProcesses(
  socket: string,
  work: string,
  upload: (url: string, content: Buffer) => Promise<void>,
  rounds: number,
  files: number,
): Promise<string[]> {
  const counts = (process.env.BENCH_PROCESSES ?? '1,2').split(',').map(Number);
  const concurrency = Number(process.env.BENCH_PROCESSES_CONCURRENCY ?? 16);
  const lines: string[] = [];
  for (const processes of counts) {
    const assay = await startAssay(socket, join(work, `processes-${processes}`), {
      ASSAY_PROCESSES: String(processes),
      ASSAY_SYNC_CONCURRENCY: String(concurrency),
      ASSAY_ACCOUNT_SYNC_CONCURRENCY: String(concurrency),
    });
    const pid = assay.child.pid ?? 0;
    try {
      const next = (i: number) => {
        return tagContent(randomBytes(4096), i);
      };
      await runConcurrently(400, concurrency, (i) => upload(assay.url, next(i)));
      let best: ReturnType<typeof summarise> | null = null;
      let bestCpu = 0;
      for (let round = 0; round < rounds; round++) {
        const pids = [pid, ...childrenOf(pid)];
        const before = pids.map(cpuSeconds);
        const { latencies, seconds } = await runConcurrently(files, concurrency, (i) =>
          upload(assay.url, next(i)),
        );
        const cpuMs =
          (pids.map(cpuSeconds).reduce((sum, after, i) => sum + after - (before[i] ?? 0), 0) *
            1000) /
          files;
        const stats = summarise(latencies, seconds, 4096);
        console.log(
          `  --processes ${processes} round ${round + 1}: ${stats.perSecond.toFixed(1)} files/s` +
            `  p50 ${stats.p50.toFixed(1)} ms  p99 ${stats.p99.toFixed(1)} ms  assay cpu ${cpuMs.toFixed(2)} ms/file`,
        );
        if (best === null || stats.perSecond > best.perSecond) {
          best = stats;
          bestCpu = cpuMs;
        }
      }
      // With one process the primary serves; with more, its children do.
      const children = childrenOf(pid).map((child) => memoryOf(child).peakMb);
      const peaks =
        `peak RSS: ${processes > 1 ? 'primary ' : ''}${memoryOf(pid).peakMb.toFixed(0)} MB` +
        (children.length > 0 ? `, largest child ${Math.max(...children).toFixed(0)} MB` : '');
      if (best !== null) {
        lines.push(
          `4 KB sync, concurrency ${concurrency}, --processes ${processes}: ${best.perSecond.toFixed(1)} files/s, ` +
            `p50 ${best.p50.toFixed(1)} ms, p99 ${best.p99.toFixed(1)} ms, assay cpu ${bestCpu.toFixed(2)} ms/file (best round); ${peaks}`,
        );
      }
    } finally {
      assay.child.kill('SIGTERM');
      await new Promise((resolve) => assay.child.once('exit', resolve));
    }
  }
  return lines;
}
