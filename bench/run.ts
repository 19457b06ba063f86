/**
 * `npm run bench`: Assay against the same clamd used directly, side by side in one run, so the
 * ratios hold on a shared, noisy machine. Not a test: it prints numbers and checks nothing.
 *
 * Scenarios: 4 KB random files at concurrency 8; 10 MB and 100 MB random uploads one at a time;
 * 4 KB files with `serve --processes` 1 and 2 (BENCH_ONLY=processes; bench/processes.ts).
 * Every file is fresh random data (clamd caches clean verdicts by hash). Rounds alternate between
 * the two paths; the best round of each is reported. Assay runs as its own process (the built
 * `bin/assay.js`), so its peak RSS (VmHWM) is its own.
 *
 * The NSFW engines are measured first, in this process (bench/nsfw.ts); BENCH_ONLY=nsfw-image or
 * BENCH_ONLY=nsfw-language runs just one of them, without clamd.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { ClamdClient } from '../src/engines/clamav/clamd-client.js';
import { findClamdBinary, ManagedClamd } from '../src/engines/clamav/managed-clamd.js';
import { photoLike } from '../test/helpers/images.js';
import { benchAsync } from './async.js';
import { benchNsfwImage, benchNsfwLanguage, JPEG_SIZES, photoSet } from './nsfw.js';
import { benchProcesses } from './processes.js';
import { cpuSeconds, memoryOf, startAssay } from './service-process.js';
import { type RunStats, runConcurrently, summarise } from './stats.js';
import { benchWorkers } from './workers.js';

const MB = 1024 * 1024;
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const SMALL_FILES = Number(process.env.BENCH_SMALL_FILES ?? 3000);
const BOUNDARY = 'assay-bench-boundary';
const AUTH = `Basic ${Buffer.from('bench:bench-secret').toString('base64')}`;

function cpuNow(pids: number[]): number[] {
  const own = process.cpuUsage();
  return [...pids.map(cpuSeconds), (own.user + own.system) / 1e6];
}

const agent = new Agent({ keepAlive: true, maxSockets: 16 });

/** One multipart upload of `content`; resolves when the 201 has been read. */
function uploadToAssay(url: string, content: Buffer): Promise<void> {
  const head = Buffer.from(
    `--${BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="f"\r\n` +
      'Content-Type: application/octet-stream\r\n\r\n',
  );
  const tail = Buffer.from(`\r\n--${BOUNDARY}--\r\n`);
  return new Promise((resolve, reject) => {
    const req = request(`${url}/v2.2/files`, {
      method: 'POST',
      agent,
      headers: {
        authorization: AUTH,
        'content-type': `multipart/form-data; boundary=${BOUNDARY}`,
        'content-length': head.length + content.length + tail.length,
      },
    });
    req.on('response', (response) => {
      const chunks: Buffer[] = [];
      response.on('data', (chunk: Buffer) => chunks.push(chunk));
      response.on('end', () => {
        if (response.statusCode !== 201) {
          reject(new Error(`assay answered ${response.statusCode}: ${Buffer.concat(chunks)}`));
        } else resolve();
      });
    });
    req.on('error', reject);
    req.write(head);
    req.write(content);
    req.end(tail);
  });
}

/** The same content straight to clamd with INSTREAM, in 1 MiB chunks as a client would send. */
async function scanDirect(clamd: ClamdClient, content: Buffer): Promise<void> {
  const scan = clamd.instream();
  for (let offset = 0; offset < content.length; offset += MB) {
    await scan.write(content.subarray(offset, offset + MB));
  }
  const verdict = await scan.finish();
  if (verdict.signature !== null) throw new Error(`unexpected finding ${verdict.signature}`);
}

function fmt(stats: RunStats): string {
  return (
    `${stats.perSecond.toFixed(1).padStart(8)} files/s ${stats.mbPerSecond.toFixed(1).padStart(7)} MB/s` +
    `  p50 ${stats.p50.toFixed(1).padStart(7)} ms  p99 ${stats.p99.toFixed(1).padStart(7)} ms`
  );
}

interface Scenario {
  name: string;
  size: number;
  count: number;
  concurrency: number;
}

const IMAGE_UPLOADS = Number(process.env.BENCH_IMAGE_UPLOADS ?? 100);

async function main() {
  const scenarios: Scenario[] = [
    { name: '4 KB files, concurrency 8', size: 4096, count: SMALL_FILES, concurrency: 8 },
    { name: '10 MB uploads, one at a time', size: 10 * MB, count: 5, concurrency: 1 },
    { name: '100 MB uploads, one at a time', size: 100 * MB, count: 2, concurrency: 1 },
  ];
  // BENCH_ONLY=4kb (a word of the scenario's name) runs just the matching scenarios.
  const only = process.env.BENCH_ONLY?.toLowerCase();
  const selected = scenarios.filter(
    (s) => only === undefined || s.name.toLowerCase().replaceAll(' ', '').includes(only),
  );
  const wantsAsync = only === undefined || 'async'.includes(only);
  const wantsImages = only === undefined || 'images'.includes(only);
  const wantsProcesses = only === undefined || 'processes'.includes(only);
  // Needs PostgreSQL (BENCH_POSTGRES); BENCH_ONLY=workers runs it alone.
  const wantsWorkers = only === undefined || 'workers'.includes(only);
  // The NSFW engines run in this process, without clamd or the service.
  const nsfwLines = await benchNsfw(only);
  if (selected.length === 0 && !wantsAsync && !wantsImages && !wantsProcesses && !wantsWorkers)
    return;

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

  const ratios: string[] = [...nsfwLines];
  try {
    // Warm both paths (JIT, connections, clamd's first-scan costs).
    await runConcurrently(200, 8, () => uploadToAssay(assay.url, randomBytes(4096)));
    await runConcurrently(200, 8, () => scanDirect(clamd, randomBytes(4096)));
    for (const scenario of selected) {
      console.log(`== ${scenario.name}`);
      const best: { direct?: RunStats; assay?: RunStats } = {};
      for (let round = 0; round < ROUNDS; round++) {
        for (const path of ['direct', 'assay'] as const) {
          // Fresh content for every file and every round, generated before the clock starts.
          const contents = Array.from({ length: Math.min(scenario.count, 64) }, () =>
            randomBytes(scenario.size),
          );
          const next = (i: number) => {
            const content = contents[i % contents.length] as Buffer;
            content.writeUInt32LE(i, 0); // unique per file even when buffers are reused
            content.writeUInt32LE(round * 2 + (path === 'assay' ? 1 : 0), 4);
            return content;
          };
          const cpuBefore = cpuNow([pid, managed.pid ?? 0]);
          const { latencies, seconds } = await runConcurrently(
            scenario.count,
            scenario.concurrency,
            (i) =>
              path === 'direct' ? scanDirect(clamd, next(i)) : uploadToAssay(assay.url, next(i)),
          );
          const stats = summarise(latencies, seconds, scenario.size);
          const cpu = cpuNow([pid, managed.pid ?? 0]).map(
            (after, i) => ((after - (cpuBefore[i] ?? 0)) * 1000) / scenario.count,
          );
          const [assayCpu, clamdCpu, clientCpu] = cpu.map((ms) => ms.toFixed(2));
          const memory = path === 'assay' ? `  assay rss ${memoryOf(pid).rssMb.toFixed(0)} MB` : '';
          console.log(`  round ${round + 1} ${path.padEnd(6)} ${fmt(stats)}${memory}`);
          console.log(
            `          cpu ms/file: assay ${assayCpu}  clamd ${clamdCpu}  bench client ${clientCpu}`,
          );
          if (best[path] === undefined || stats.seconds < (best[path]?.seconds ?? Infinity))
            best[path] = stats;
        }
      }
      const { direct, assay: viaAssay } = best;
      if (direct && viaAssay) {
        const throughput = viaAssay.perSecond / direct.perSecond;
        const time = viaAssay.p50 / direct.p50;
        const line =
          `${scenario.name}: assay/direct throughput ${throughput.toFixed(2)}, ` +
          `p50 time ${time.toFixed(2)}x (best rounds: direct ${direct.perSecond.toFixed(1)}/s, ` +
          `assay ${viaAssay.perSecond.toFixed(1)}/s)`;
        ratios.push(line);
      }
      console.log('');
    }
    if (wantsImages) {
      console.log('== JPEG images through the API (all categories: clamd and nsfw-image)');
      const lines = await benchImagesOverHttp(assay.url);
      for (const line of lines) console.log(`  ${line}`);
      ratios.push(...lines);
      console.log('');
    }
    if (wantsAsync) {
      console.log('== async processing and callbacks');
      const lines = await benchAsync(
        assay.url,
        AUTH,
        Number(process.env.BENCH_ASYNC_JOBS ?? 500),
        4,
      );
      for (const line of lines) console.log(`  ${line}`);
      ratios.push(...lines);
      console.log('');
    }
    if (wantsProcesses) {
      console.log('== 4 KB sync uploads, serve --processes 1 and 2');
      const lines = await benchProcesses(socket, work, uploadToAssay, ROUNDS, SMALL_FILES);
      ratios.push(...lines);
      console.log('');
    }
    if (wantsWorkers) {
      console.log('== 4 KB async uploads on PostgreSQL, 1 and 2 worker processes');
      const lines = await benchWorkers(socket, work, Number(process.env.BENCH_WORKER_JOBS ?? 1000));
      ratios.push(...lines);
      console.log('');
    }
    const memory = memoryOf(pid);
    console.log('== summary');
    for (const line of ratios) console.log(`  ${line}`);
    console.log(`  assay peak RSS (VmHWM) over the whole run: ${memory.peakMb.toFixed(0)} MB`);
  } finally {
    assay.child.kill('SIGTERM');
    await new Promise((r) => assay.child.once('exit', r));
    await managed.stop();
    rmSync(work, { recursive: true, force: true });
    agent.destroy();
  }
}

/**
 * Photo-like 1 and 2 MP JPEGs uploaded synchronously: HTTP, hashing, clamd and the image engine
 * (decode and inference in its workers) end to end. The first upload starts the engine's workers.
 */
async function benchImagesOverHttp(url: string): Promise<string[]> {
  const lines: string[] = [];
  const started = performance.now();
  await uploadToAssay(url, await photoLike(640, 480, 99));
  lines.push(
    `first image (starts the nsfw-image workers): ${(performance.now() - started).toFixed(0)} ms`,
  );
  for (const [label, width, height] of JPEG_SIZES) {
    const { images, size } = await photoSet(width, height);
    const upload = (i: number) => uploadToAssay(url, images[i % images.length] as Buffer);
    await runConcurrently(8, 2, upload); // warm-up
    for (const concurrency of [1, 2]) {
      const { latencies, seconds } = await runConcurrently(IMAGE_UPLOADS, concurrency, upload);
      const stats = summarise(latencies, seconds, size);
      lines.push(
        `${label} JPEG over HTTP, concurrency ${concurrency}: ${stats.perSecond.toFixed(1)} images/s, ` +
          `p50 ${stats.p50.toFixed(1)} ms, p99 ${stats.p99.toFixed(1)} ms`,
      );
    }
  }
  return lines;
}

/** BENCH_ONLY=nsfw-image or nsfw-language (or nsfw for both) runs just that engine's bench. */
async function benchNsfw(only: string | undefined): Promise<string[]> {
  const summary: string[] = [];
  for (const [name, bench] of [
    ['nsfw-image', benchNsfwImage],
    ['nsfw-language', benchNsfwLanguage],
  ] as const) {
    if (only !== undefined && !name.includes(only)) continue;
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
