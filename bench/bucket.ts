/**
 * `npm run bench:bucket`: watched buckets against the API, side by side in one run, on one clamd.
 * Per size (4 KB, 1 MB), the same number of fresh random objects (clamd caches clean verdicts by
 * hash, and Assay's verdict cache is off) goes two ways: put into a moto bucket and scanned by a
 * full listing (`assay admin bucket scan`) until every verdict is written back as tags; and
 * uploaded through the API (`POST /v2.2/files`, concurrency 8). Reported: objects per second, and
 * CPU per object of Assay, clamd and moto (S3 itself: not Assay's cost), from /proc.
 *
 * `BENCH_ONLY=10k` lists 10,000 objects of 4 KB instead (the issue's bulk run: progress printed),
 * while another account's async uploads (one every 500 ms) measure how long interactive work
 * waits behind the bulk import, against the same uploads before it.
 * BENCH_ONLY (4kb, 1mb, 10k) narrows a run. Not a test: it prints numbers and checks nothing.
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '../src/config.js';
import { openStore } from '../src/store/open-store.js';
import { MOTO_ENV, type Moto, startMoto } from '../test/helpers/moto.js';
import { cpuSeconds, startAssay, startBenchClamd } from './service-process.js';

const ONLY = (process.env.BENCH_ONLY ?? '').split(',').filter(Boolean);
const KB = 1024;
const MB = 1024 * KB;

interface Scenario {
  key: string;
  size: number;
  objects: number;
  /** Also through the API, for the ratio. */
  api: boolean;
  /** Another account's async uploads during the listing: their time to a result. */
  interactive?: boolean;
}

const SCENARIOS: Scenario[] = [
  { key: '4kb', size: 4 * KB, objects: 1000, api: true },
  { key: '1mb', size: MB, objects: 100, api: true },
  { key: '10k', size: 4 * KB, objects: 10_000, api: false, interactive: true },
];
const wanted = (key: string) => (ONLY.length === 0 ? key !== '10k' : ONLY.includes(key));

const AUTH = `Basic ${Buffer.from('bench:bench-secret').toString('base64')}`;

interface Measured {
  seconds: number;
  cpu: { assay: number; clamd: number; moto: number };
}

async function measure(
  pids: { assay: number; clamd: number; moto: number },
  work: () => Promise<void>,
): Promise<Measured> {
  const before = {
    assay: cpuSeconds(pids.assay),
    clamd: cpuSeconds(pids.clamd),
    moto: cpuSeconds(pids.moto),
  };
  const started = performance.now();
  await work();
  const seconds = (performance.now() - started) / 1000;
  return {
    seconds,
    cpu: {
      assay: cpuSeconds(pids.assay) - before.assay,
      clamd: cpuSeconds(pids.clamd) - before.clamd,
      moto: cpuSeconds(pids.moto) - before.moto,
    },
  };
}

function describe(name: string, objects: number, measured: Measured): string {
  const perObject = (seconds: number) => `${((seconds / objects) * 1000).toFixed(2)} ms`;
  return `  ${name.padEnd(7)} ${(objects / measured.seconds).toFixed(1).padStart(8)} objects/s  CPU/object: Assay ${perObject(measured.cpu.assay)}, clamd ${perObject(measured.cpu.clamd)}, moto ${perObject(measured.cpu.moto)}`;
}

async function putAll(moto: Moto, bucket: string, scenario: Scenario): Promise<void> {
  const started = performance.now();
  for (let i = 0; i < scenario.objects; i += 32) {
    await Promise.all(
      Array.from({ length: Math.min(32, scenario.objects - i) }, (_, j) =>
        moto.put(
          bucket,
          `objects/${String(i + j).padStart(6, '0')}.bin`,
          randomBytes(scenario.size),
        ),
      ),
    );
    if (scenario.objects >= 5000 && (i / 32) % 50 === 0) {
      process.stdout.write(`  put ${i}/${scenario.objects}\r`);
    }
  }
  console.log(
    `  put ${scenario.objects} objects of ${scenario.size} bytes into moto in ${((performance.now() - started) / 1000).toFixed(1)} s`,
  );
}

async function uploadAll(url: string, scenario: Scenario): Promise<void> {
  let next = 0;
  const worker = async () => {
    for (let i = next++; i < scenario.objects; i = next++) {
      const form = new FormData();
      form.set('file', new Blob([randomBytes(scenario.size)]), `object-${i}.bin`);
      const answer = await fetch(`${url}/v2.2/files`, {
        method: 'POST',
        headers: { authorization: AUTH },
        body: form,
      });
      if (answer.status !== 201) throw new Error(`upload answered ${answer.status}`);
      await answer.arrayBuffer();
    }
  };
  await Promise.all(Array.from({ length: 8 }, worker));
}

/** Times (ms) from an async upload to its result, one every 500 ms while `running()` holds. */
async function interactiveUploads(
  url: string,
  auth: string,
  running: () => boolean,
): Promise<number[]> {
  const times: number[] = [];
  const one = async () => {
    const form = new FormData();
    form.set('file', new Blob([randomBytes(4 * KB)]), 'interactive.bin');
    const started = performance.now();
    const answer = await fetch(`${url}/v2.2/files/async`, {
      method: 'POST',
      headers: { authorization: auth },
      body: form,
    });
    const { id } = (await answer.json()) as { id: string };
    for (;;) {
      const result = await fetch(`${url}/v2.2/files/${id}`, { headers: { authorization: auth } });
      await result.arrayBuffer();
      if (result.status === 200) break;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    times.push(performance.now() - started);
  };
  const pending: Promise<void>[] = [];
  while (running()) {
    pending.push(one());
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
  await Promise.all(pending);
  return times;
}

function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? 0;
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'assay-bench-bucket-'));
  chmodSync(dir, 0o777);
  const { clamd, socket, pid: clamdPid } = await startBenchClamd(dir);
  const moto = await startMoto();
  const dataDir = join(dir, 'assay');
  const assay = await startAssay(socket, dataDir, {
    ...MOTO_ENV,
    ASSAY_VERDICT_CACHE: 'off',
    ASSAY_BUCKET_BACKLOG: '256',
    ASSAY_BUCKET_QUEUE_WAIT: '1',
  });
  const pids = { assay: assay.child.pid ?? 0, clamd: clamdPid, moto: moto.pid };
  const store = await openStore(loadConfig({ ASSAY_DATA_DIR: dataDir }));
  const cli = (...args: string[]) =>
    execFileSync(process.execPath, ['bin/assay.js', ...args], {
      env: { ...process.env, ASSAY_DATA_DIR: dataDir },
      encoding: 'utf8',
    });
  const lines: string[] = [];
  try {
    for (const scenario of SCENARIOS.filter((s) => wanted(s.key))) {
      console.log(`== ${scenario.key}: ${scenario.objects} objects of ${scenario.size} bytes`);
      const bucket = await moto.bucket(`bench-${scenario.key}`);
      await putAll(moto, bucket.name, scenario);
      const name = `bench-${scenario.key}-${randomBytes(2).toString('hex')}`;
      cli(
        ...['admin', 'bucket', 'add', name, '--bucket', bucket.name, '--key', 'bench'],
        ...['--endpoint', moto.endpoint, '--credentials', 'env:MOTO'],
      );
      const source = await store.bucketSources.findByName(name);
      const sourceId = source?.id ?? '';
      let other = '';
      let before: number[] = [];
      if (scenario.interactive === true) {
        const account = JSON.parse(
          cli('admin', 'account', 'create', '--name', 'Other', '--json'),
        ) as { id: string };
        const key = JSON.parse(
          cli('admin', 'key', 'create', '--account', account.id, '--json'),
        ) as {
          key: string;
          secret: string;
        };
        other = `Basic ${Buffer.from(`${key.key}:${key.secret}`).toString('base64')}`;
        const until = performance.now() + 15_000;
        before = await interactiveUploads(assay.url, other, () => performance.now() < until);
      }
      let listing = true;
      const during =
        scenario.interactive === true
          ? interactiveUploads(assay.url, other, () => listing)
          : Promise.resolve([]);
      const listed = await measure(pids, async () => {
        cli('admin', 'bucket', 'scan', name);
        for (;;) {
          const counts = await store.bucketObjects.countsByStatus(sourceId);
          const done = Object.entries(counts)
            .filter(([status]) => status !== 'scanning' && status !== 'unscanned')
            .reduce((sum, [, count]) => sum + count, 0);
          const writing = await store.bucketObjects.writesDue(sourceId);
          const listing = (await store.bucketSources.find(sourceId))?.listing.state;
          if (scenario.objects >= 5000)
            process.stdout.write(`  scanned ${done}/${scenario.objects}\r`);
          if (listing === 'idle' && done >= scenario.objects && writing === 0) break;
          await new Promise((resolve) => setTimeout(resolve, 100));
        }
      });
      listing = false;
      const bucketLine = describe('bucket', scenario.objects, listed);
      console.log(bucketLine);
      if (scenario.interactive === true) {
        const times = await during;
        const line = `another account's async 4-KB uploads, upload to result: before ${percentile(before, 50).toFixed(0)} ms median, ${percentile(before, 95).toFixed(0)} ms p95 (${before.length}); during the listing ${percentile(times, 50).toFixed(0)} ms median, ${percentile(times, 95).toFixed(0)} ms p95 (${times.length})`;
        console.log(`  ${line}`);
        lines.push(`${scenario.key.padEnd(4)} ${line}`);
      }
      let line = `${scenario.key.padEnd(4)} bucket ${(scenario.objects / listed.seconds).toFixed(1)} objects/s, Assay CPU ${((listed.cpu.assay / scenario.objects) * 1000).toFixed(2)} ms/object`;
      if (scenario.api) {
        const uploaded = await measure(pids, () => uploadAll(assay.url, scenario));
        console.log(describe('API', scenario.objects, uploaded));
        line += `; API ${(scenario.objects / uploaded.seconds).toFixed(1)} objects/s, Assay CPU ${((uploaded.cpu.assay / scenario.objects) * 1000).toFixed(2)} ms/object; bucket/API throughput ${(uploaded.seconds / listed.seconds).toFixed(2)}`;
      }
      lines.push(line);
    }
  } finally {
    await store.close();
    assay.child.kill('SIGTERM');
    await new Promise((resolve) => assay.child.once('exit', resolve));
    await moto.stop();
    await clamd.stop();
    rmSync(dir, { recursive: true, force: true });
  }
  console.log(`\nSummary (moto's own CPU is S3's, not Assay's)\n${lines.join('\n')}`);
}

await main();
