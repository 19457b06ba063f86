/**
 * `npm run bench`: Assay against the same clamd used directly, side by side in one run, so the
 * ratios hold on a shared, noisy machine. Not a test: it prints numbers and checks nothing.
 *
 * Side-by-side scenarios (bench/side-by-side.ts), each reporting the throughput ratio Assay/direct,
 * Assay's and clamd's CPU per file (from /proc) and Assay's peak RSS during it (which holds what
 * earlier scenarios left resident: a process's RSS seldom shrinks; BENCH_ONLY runs one alone):
 *   4kb           4 KB random files at concurrency 8
 *   10mb, 100mb   10 MB and 100 MB random uploads one at a time
 *   repeat-4kb    one 4 KB content submitted again and again, concurrency 8
 *   repeat-10mb   one 10 MB content submitted again and again, one at a time
 * Fresh files are random data, unique per file (clamd caches clean verdicts by hash); the repeated
 * scenarios measure what a cache of verdicts saves, clamd's own on the direct path. Rounds alternate
 * between the two paths; the best round of each is reported, CPU as the median of the rounds.
 *
 * Then, on the same service: `async-e2e` (async end to end against sync, bench/async-e2e.ts),
 * `async` (latency and callbacks, bench/async.ts); on services of their own: `processes`
 * (`serve --processes` 1 and 2, bench/processes.ts) and `workers` (PostgreSQL, bench/workers.ts);
 * last, `images` (JPEGs through the API, which start the image engine's workers); before all of
 * them, on two services of its own, `images-fuzzy` (1 MP JPEGs with clamd's image fuzzy hash on and
 * off, bench/image-fuzzy-hash.ts). The summary ends
 * with Assay's peak RSS over the whole run without the image scenarios, and during them.
 *
 * The NSFW engines are measured first, in this process (bench/nsfw.ts; `nsfw-image`,
 * `nsfw-language`). BENCH_ONLY takes a comma-separated list of these names; a prefix before a
 * hyphen selects the family (`repeat`, `nsfw`). Assay runs as its own process (the built
 * `bin/assay.js`), so its CPU and RSS are its own.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { ClamdClient } from '../src/engines/clamav/clamd-client.js';
import { findClamdBinary, ManagedClamd } from '../src/engines/clamav/managed-clamd.js';
import { benchAsync } from './async.js';
import { benchAsyncEndToEnd } from './async-e2e.js';
import { AUTH, closeClients, scanDirect, uploadToAssay } from './clients.js';
import { benchImageFuzzyHash } from './image-fuzzy-hash.js';
import { benchImagesOverHttp } from './images.js';
import { benchNsfwImage, benchNsfwLanguage } from './nsfw.js';
import { benchProcesses } from './processes.js';
import { memoryOf, resetPeakMemory, startAssay } from './service-process.js';
import { runScenario, type Scenario } from './side-by-side.js';
import { runConcurrently } from './stats.js';
import { benchWorkers } from './workers.js';

const MB = 1024 * 1024;
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const SMALL_FILES = Number(process.env.BENCH_SMALL_FILES ?? 3000);

const SCENARIOS: Scenario[] = [
  {
    key: '4kb',
    name: '4 KB files, concurrency 8',
    size: 4096,
    count: SMALL_FILES,
    concurrency: 8,
    repeated: false,
  },
  {
    key: '10mb',
    name: '10 MB uploads, one at a time',
    size: 10 * MB,
    count: 5,
    concurrency: 1,
    repeated: false,
  },
  {
    key: '100mb',
    name: '100 MB uploads, one at a time',
    size: 100 * MB,
    count: 2,
    concurrency: 1,
    repeated: false,
  },
  {
    key: 'repeat-4kb',
    name: 'one 4 KB content repeated, concurrency 8',
    size: 4096,
    count: SMALL_FILES,
    concurrency: 8,
    repeated: true,
  },
  {
    key: 'repeat-10mb',
    name: 'one 10 MB content repeated, one at a time',
    size: 10 * MB,
    count: 10,
    concurrency: 1,
    repeated: true,
  },
];

/** Whether BENCH_ONLY (a comma-separated list; unset: everything) selects the part named `key`. */
function selects(key: string): boolean {
  const only = process.env.BENCH_ONLY?.toLowerCase();
  if (only === undefined || only === '') return true;
  return only
    .split(',')
    .map((part) => part.trim())
    .some((part) => key === part || key.startsWith(`${part}-`));
}

async function main() {
  const selected = SCENARIOS.filter((scenario) => selects(scenario.key));
  const wantsAsync = selects('async');
  const wantsAsyncEndToEnd = selects('async-e2e');
  const wantsImages = selects('images');
  // Two services of its own, each with its own clamd: ScanImageFuzzyHash on and off.
  const wantsFuzzyHash = selects('images-fuzzy');
  const wantsProcesses = selects('processes');
  // Needs PostgreSQL (BENCH_POSTGRES).
  const wantsWorkers = selects('workers');
  // The NSFW engines run in this process, without clamd or the service.
  const summary = await benchNsfw();
  if (wantsFuzzyHash) {
    console.log('== JPEG images through the API, clamd image fuzzy hash on and off');
    const fuzzyDir = mkdtempSync(join(tmpdir(), 'assay-bench-fuzzy-'));
    try {
      summary.push(...(await benchImageFuzzyHash(fuzzyDir)));
    } finally {
      rmSync(fuzzyDir, { recursive: true, force: true });
    }
    console.log('');
  }
  if (
    selected.length === 0 &&
    !wantsAsync &&
    !wantsAsyncEndToEnd &&
    !wantsImages &&
    !wantsProcesses &&
    !wantsWorkers
  ) {
    printSummary(summary);
    return;
  }

  const clamdPath = findClamdBinary();
  if (clamdPath === null) throw new Error('clamd is not installed: run ./setup.sh');
  const work = mkdtempSync(join(tmpdir(), 'assay-bench-'));
  const logger = pino({ level: 'warn' });
  const managed = new ManagedClamd({
    dataDir: join(work, 'clamd'),
    clamdPath,
    maxFileSize: 200 * MB,
    logger,
  });
  await managed.start();
  // A connection per file, as most clamd clients do: the baseline of earlier runs.
  const clamd = new ClamdClient(managed.address, { sessions: 0 });
  const socket = managed.address.kind === 'unix' ? managed.address.path : '';
  const assay = await startAssay(socket, join(work, 'assay'));
  const pid = assay.child.pid ?? 0;
  console.log(
    `assay pid ${pid} at ${assay.url}; clamd pid ${managed.pid}; ${ROUNDS} rounds each\n`,
  );

  try {
    // Warm both paths (JIT, connections, clamd's first-scan costs) with fresh random files.
    await runConcurrently(200, 8, () => uploadToAssay(assay.url, randomBytes(4096)));
    await runConcurrently(200, 8, () => scanDirect(clamd, randomBytes(4096)));
    const run = { clamd, assayUrl: assay.url, assayPid: pid, clamdPid: managed.pid ?? 0 };
    // Assay's peak RSS from its start to the image scenarios.
    let peakMb = 0;
    for (const scenario of selected) {
      const report = await runScenario(scenario, { ...run, rounds: ROUNDS });
      summary.push(report.line);
      peakMb = Math.max(peakMb, report.priorPeakMb, report.peakMb);
    }
    if (wantsAsyncEndToEnd) {
      console.log('== 4 KB async end to end against sync, concurrency 8 (SQLite)');
      peakMb = Math.max(peakMb, resetPeakMemory(pid));
      const lines = await benchAsyncEndToEnd({
        url: assay.url,
        pid,
        dataDir: join(work, 'assay'),
        count: SMALL_FILES,
        concurrency: 8,
        rounds: ROUNDS,
      });
      for (const line of lines) console.log(`  ${line}`);
      summary.push(...lines);
      console.log('');
    }
    if (wantsAsync) {
      console.log('== async processing and callbacks');
      peakMb = Math.max(peakMb, resetPeakMemory(pid));
      const lines = await benchAsync(
        assay.url,
        AUTH,
        Number(process.env.BENCH_ASYNC_JOBS ?? 500),
        4,
      );
      lines.push(`async: assay peak RSS ${memoryOf(pid).peakMb.toFixed(0)} MB`);
      for (const line of lines) console.log(`  ${line}`);
      summary.push(...lines);
      console.log('');
    }
    if (wantsProcesses) {
      console.log('== 4 KB sync uploads, serve --processes 1 and 2');
      const lines = await benchProcesses(socket, work, uploadToAssay, ROUNDS, SMALL_FILES);
      summary.push(...lines);
      console.log('');
    }
    if (wantsWorkers) {
      console.log('== 4 KB async uploads on PostgreSQL, 1 and 2 worker processes');
      const lines = await benchWorkers(socket, work, Number(process.env.BENCH_WORKER_JOBS ?? 1000));
      summary.push(...lines);
      console.log('');
    }
    // Last: the image engine's workers (a model each) would weigh on every later scenario.
    peakMb = Math.max(peakMb, resetPeakMemory(pid));
    const peakLines = [
      `assay peak RSS (VmHWM) over the whole run without the image scenarios: ${peakMb.toFixed(0)} MB`,
    ];
    if (wantsImages) {
      console.log('== JPEG images through the API (all categories: clamd and nsfw-image)');
      const lines = await benchImagesOverHttp(assay.url);
      for (const line of lines) console.log(`  ${line}`);
      summary.push(...lines);
      console.log('');
      peakLines.push(
        `assay peak RSS during the image scenarios: ${memoryOf(pid).peakMb.toFixed(0)} MB`,
      );
    }
    printSummary([...summary, ...peakLines]);
  } finally {
    assay.child.kill('SIGTERM');
    await new Promise((r) => assay.child.once('exit', r));
    await managed.stop();
    rmSync(work, { recursive: true, force: true });
    closeClients();
  }
}

function printSummary(lines: string[]): void {
  if (lines.length === 0) return;
  console.log('== summary');
  for (const line of lines) console.log(`  ${line}`);
}

/** The NSFW engines on their own (`nsfw-image`, `nsfw-language`), in this process. */
async function benchNsfw(): Promise<string[]> {
  const summary: string[] = [];
  for (const [name, bench] of [
    ['nsfw-image', benchNsfwImage],
    ['nsfw-language', benchNsfwLanguage],
  ] as const) {
    if (!selects(name)) continue;
    console.log(`== ${name} engine (in process)`);
    const lines = await bench();
    for (const line of lines) console.log(`  ${line}`);
    summary.push(...lines.map((line) => `${name}: ${line}`));
    console.log('');
  }
  return summary;
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
