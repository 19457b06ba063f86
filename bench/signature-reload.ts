/**
 * `npm run bench:reload`: a large signature set reloaded while 4 KB uploads run at concurrency 8,
 * with the managed clamd's two reload modes side by side (ASSAY_CLAMD_RELOAD): failed requests,
 * p50, p99 and the longest wait during the reload, how long the reload took, and clamd's memory
 * before, at its peak during the reload, and after.
 *
 * The set is generated at run time into the operator's folder (ASSAY_SIGNATURES_DIR):
 * BENCH_HASHES hash signatures (.hdb, default 3,000,000) and BENCH_BODIES body signatures (.ndb,
 * default 300,000), which take clamd some seconds to load on this machine. The reload is caused
 * as an operator would: a new rule file in that folder. A script, not a test: it takes minutes.
 */
import { createHash } from 'node:crypto';
import {
  closeSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeSync,
} from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { closeClients, uploadToAssay } from './clients.js';
import { memoryOf, startAssay } from './service-process.js';
import { percentile } from './stats.js';

const HASHES = Number(process.env.BENCH_HASHES ?? 3_000_000);
const BODIES = Number(process.env.BENCH_BODIES ?? 300_000);
const CONCURRENCY = 8;
const MODES = (process.env.BENCH_MODES ?? 'concurrent,blocking').split(',');
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Writes the generated set in chunks (never the whole file in memory). */
function generateSignatures(dir: string): void {
  const write = (name: string, count: number, line: (i: number) => string) => {
    const fd = openSync(join(dir, name), 'w');
    let chunk: string[] = [];
    for (let i = 0; i < count; i++) {
      chunk.push(line(i));
      if (chunk.length === 50_000 || i === count - 1) {
        writeSync(fd, `${chunk.join('\n')}\n`);
        chunk = [];
      }
    }
    closeSync(fd);
  };
  write('generated.hdb', HASHES, (i) => {
    const md5 = createHash('md5').update(`sig${i}`).digest('hex');
    return `${md5}:${1000 + (i % 5000)}:Bench.Hash-${i}`;
  });
  write('generated.ndb', BODIES, (i) => {
    const body = createHash('sha1').update(`body${i}`).digest('hex').slice(0, 24);
    return `Bench.Body-${i}:0:*:${body}`;
  });
}

/** The managed clamd of the Assay whose data dir is `dataDir`, found by its arguments. */
function clamdPid(dataDir: string): number {
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const args = readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0');
      if (
        args.some((arg) => arg.endsWith('clamd')) &&
        args.includes(join(dataDir, 'clamd', 'clamd.conf'))
      ) {
        return Number(entry);
      }
    } catch {
      // gone meanwhile
    }
  }
  throw new Error('the managed clamd is not running');
}

async function databasesVersion(url: string): Promise<string | null> {
  const ready = (await (await fetch(`${url}/health/ready`)).json()) as {
    engines?: Array<{ databases_version: string | null }>;
  };
  return ready.engines?.[0]?.databases_version ?? null;
}

interface Sample {
  start: number;
  end: number;
  ok: boolean;
}

async function measure(mode: string, signatures: string) {
  const dataDir = mkdtempSync(join(tmpdir(), 'assay-bench-reload-'));
  const assay = await startAssay('managed', dataDir, {
    ASSAY_SIGNATURES_DIR: signatures,
    ASSAY_SIGNATURES_CHECK: '1',
    ASSAY_CLAMD_DATABASE_DIR: 'none',
    ASSAY_CLAMD_RELOAD: mode,
    ASSAY_VERDICT_CACHE: 'off',
  });
  try {
    const pid = clamdPid(dataDir);
    const samples: Sample[] = [];
    let running = true;
    const clients = Array.from({ length: CONCURRENCY }, async () => {
      while (running) {
        const start = performance.now();
        const ok = await uploadToAssay(
          assay.url,
          Buffer.from(
            createHash('sha512').update(`${start}${Math.random()}`).digest('hex').repeat(32),
          ),
        ).then(
          () => true,
          () => false,
        );
        samples.push({ start, end: performance.now(), ok });
      }
    });
    let peakMb = 0;
    const memory = setInterval(() => {
      peakMb = Math.max(peakMb, memoryOf(pid).rssMb);
    }, 50);
    await sleep(5_000);
    const beforeMb = memoryOf(pid).rssMb;
    const version = await databasesVersion(assay.url);
    const changedAt = performance.now();
    await writeFile(
      join(signatures, `added-${mode}.ndb`),
      `Bench.Added.${mode}:0:*:${'ab'.repeat(16)}\n`,
    );
    for (;;) {
      if (performance.now() - changedAt > 300_000) throw new Error('no reload within 5 minutes');
      const now = await databasesVersion(assay.url);
      if (now !== null && now !== version) break;
      await sleep(50);
    }
    const loadedAt = performance.now();
    await sleep(3_000);
    running = false;
    await Promise.all(clients);
    clearInterval(memory);
    const during = samples.filter((s) => s.end >= changedAt && s.start <= loadedAt + 1_000);
    const latencies = during.map((s) => s.end - s.start).sort((a, b) => a - b);
    return {
      mode,
      requests: samples.length,
      failed: samples.filter((s) => !s.ok).length,
      duringReload: during.length,
      p50: percentile(latencies, 50),
      p99: percentile(latencies, 99),
      longest: latencies.at(-1) ?? 0,
      reloadSeconds: (loadedAt - changedAt) / 1000,
      beforeMb,
      peakMb,
      afterMb: memoryOf(pid).rssMb,
    };
  } finally {
    assay.child.kill('SIGTERM');
    await new Promise((resolve) => assay.child.once('exit', resolve));
    rmSync(dataDir, { recursive: true, force: true });
  }
}

const signatures = mkdtempSync(join(tmpdir(), 'assay-bench-signatures-'));
try {
  const began = Date.now();
  generateSignatures(signatures);
  console.log(
    `generated ${HASHES.toLocaleString()} hash and ${BODIES.toLocaleString()} body signatures in ${((Date.now() - began) / 1000).toFixed(1)} s`,
  );
  const rows = [];
  for (const mode of MODES) rows.push(await measure(mode, signatures));
  console.log(
    '\n| reload mode | requests | failed | during the reload | p50 ms | p99 ms | longest ms | reload s | clamd MB before | peak | after |',
  );
  console.log('|---|---|---|---|---|---|---|---|---|---|---|');
  for (const r of rows) {
    console.log(
      `| ${r.mode} | ${r.requests} | ${r.failed} | ${r.duringReload} | ${r.p50.toFixed(1)} | ${r.p99.toFixed(1)} | ${r.longest.toFixed(0)} | ${r.reloadSeconds.toFixed(1)} | ${r.beforeMb.toFixed(0)} | ${r.peakMb.toFixed(0)} | ${r.afterMb.toFixed(0)} |`,
    );
  }
} finally {
  closeClients();
  rmSync(signatures, { recursive: true, force: true });
}
