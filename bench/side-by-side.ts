/**
 * One scenario of `npm run bench`: the same files through Assay and straight to clamd, rounds
 * alternating between the two paths. Per round: throughput, latency, and the CPU each process
 * spent per file (Assay's and clamd's from /proc, the bench client's own); per scenario: the
 * throughput ratio of the best rounds, the median CPU per file, and Assay's peak RSS during it.
 */
import { randomBytes } from 'node:crypto';
import type { ClamdClient } from '../src/engines/clamav/clamd-client.js';
import { scanDirect, uploadToAssay } from './clients.js';
import { cpuSeconds, memoryOf, resetPeakMemory } from './service-process.js';
import { median, type RunStats, runConcurrently, summarise } from './stats.js';
import { tagContent } from './unique-content.js';

export interface Scenario {
  /** The name BENCH_ONLY selects it by. */
  key: string;
  name: string;
  size: number;
  count: number;
  concurrency: number;
  /**
   * One content submitted again and again (clamd's cache of clean verdicts answers the repeats;
   * Assay's verdict cache, once it has one, should too), rather than fresh random content per file.
   */
  repeated: boolean;
}

export interface SideBySide {
  clamd: ClamdClient;
  assayUrl: string;
  assayPid: number;
  clamdPid: number;
  rounds: number;
}

export interface ScenarioReport {
  line: string;
  /** Assay's peak RSS during the scenario, in MB. */
  peakMb: number;
  /** Assay's peak RSS from the previous reset up to the scenario's start, in MB. */
  priorPeakMb: number;
}

type Path = 'direct' | 'assay';

interface PathRounds {
  best: RunStats | null;
  assayCpu: number[];
  clamdCpu: number[];
}

function fmt(stats: RunStats): string {
  return (
    `${stats.perSecond.toFixed(1).padStart(8)} files/s ${stats.mbPerSecond.toFixed(1).padStart(7)} MB/s` +
    `  p50 ${stats.p50.toFixed(1).padStart(7)} ms  p99 ${stats.p99.toFixed(1).padStart(7)} ms`
  );
}

/** CPU seconds so far of Assay, clamd and this process. */
function cpuNow(run: SideBySide): [number, number, number] {
  const own = process.cpuUsage();
  return [cpuSeconds(run.assayPid), cpuSeconds(run.clamdPid), (own.user + own.system) / 1e6];
}

/** The files of one round on one path: fresh random content per file, or the one repeated. */
function contentsFor(scenario: Scenario, round: number, path: Path, repeated: Buffer | null) {
  if (repeated !== null) return () => repeated;
  // Generated before the clock starts; at most 64 buffers, made unique per file by a counter.
  const contents = Array.from({ length: Math.min(scenario.count, 64) }, () =>
    randomBytes(scenario.size),
  );
  return (i: number) => {
    const content = contents[i % contents.length] as Buffer;
    return tagContent(content, i, round * 2 + (path === 'assay' ? 1 : 0));
  };
}

export async function runScenario(scenario: Scenario, run: SideBySide): Promise<ScenarioReport> {
  console.log(`== ${scenario.name}`);
  const repeated = scenario.repeated ? randomBytes(scenario.size) : null;
  if (repeated !== null) {
    // The first submission is a full scan on both paths; the rounds measure the repeats.
    await scanDirect(run.clamd, repeated);
    await uploadToAssay(run.assayUrl, repeated);
  }
  const priorPeakMb = resetPeakMemory(run.assayPid);
  const paths: Record<Path, PathRounds> = {
    direct: { best: null, assayCpu: [], clamdCpu: [] },
    assay: { best: null, assayCpu: [], clamdCpu: [] },
  };
  for (let round = 0; round < run.rounds; round++) {
    for (const path of ['direct', 'assay'] as const) {
      const next = contentsFor(scenario, round, path, repeated);
      const before = cpuNow(run);
      const { latencies, seconds } = await runConcurrently(
        scenario.count,
        scenario.concurrency,
        (i) =>
          path === 'direct' ? scanDirect(run.clamd, next(i)) : uploadToAssay(run.assayUrl, next(i)),
      );
      const stats = summarise(latencies, seconds, scenario.size);
      const [assayCpu, clamdCpu, clientCpu] = cpuNow(run).map(
        (after, i) => ((after - (before[i] ?? 0)) * 1000) / scenario.count,
      ) as [number, number, number];
      const rounds = paths[path];
      rounds.assayCpu.push(assayCpu);
      rounds.clamdCpu.push(clamdCpu);
      if (rounds.best === null || stats.seconds < rounds.best.seconds) rounds.best = stats;
      const rss =
        path === 'assay' ? `  assay rss ${memoryOf(run.assayPid).rssMb.toFixed(0)} MB` : '';
      console.log(`  round ${round + 1} ${path.padEnd(6)} ${fmt(stats)}${rss}`);
      console.log(
        `          cpu ms/file: assay ${assayCpu.toFixed(2)}  clamd ${clamdCpu.toFixed(2)}  bench client ${clientCpu.toFixed(2)}`,
      );
    }
  }
  const peakMb = memoryOf(run.assayPid).peakMb;
  console.log('');
  const { direct, assay } = paths;
  if (direct.best === null || assay.best === null)
    return { line: scenario.name, peakMb, priorPeakMb };
  const cpu = (values: number[]) => median(values).toFixed(2);
  const line =
    `${scenario.name}: assay/direct throughput ${(assay.best.perSecond / direct.best.perSecond).toFixed(2)}, ` +
    `p50 time ${(assay.best.p50 / direct.best.p50).toFixed(2)}x (best rounds: direct ` +
    `${direct.best.perSecond.toFixed(1)}/s, assay ${assay.best.perSecond.toFixed(1)}/s); ` +
    `cpu ms/file (median of rounds): assay ${cpu(assay.assayCpu)}, clamd ${cpu(assay.clamdCpu)} ` +
    `under assay, clamd ${cpu(direct.clamdCpu)} direct; assay peak RSS ${peakMb.toFixed(0)} MB`;
  return { line, peakMb, priorPeakMb };
}
