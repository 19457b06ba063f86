/**
 * Issue 11 item 4, measured: a 100 MB async upload streamed into the S3 spool and read back,
 * against a local S3-compatible server (fauxqs, in memory) in its own process. Each part size runs
 * in a fresh process, so its peak RSS is the spool's alone; then the data directory's spool.
 *   node --import tsx bench/s3-spool.ts
 */
import { execFileSync, fork } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ContentSpool } from '../src/spool/content-spool.js';

const MB = 1_000_000;
const SIZE = 100 * MB;
const MiB = 1024 * 1024;

/** Server mode: the S3 server with one bucket; sends its endpoint to the parent. */
async function serve(): Promise<void> {
  const { buildApp } = await import('fauxqs');
  const { CreateBucketCommand, S3Client } = await import('@aws-sdk/client-s3');
  const app = buildApp({ logger: false });
  const endpoint = await app.listen({ port: 0, host: '127.0.0.1' });
  const client = new S3Client({ endpoint, region: 'us-east-1', forcePathStyle: true });
  await client.send(new CreateBucketCommand({ Bucket: 'bench-spool' }));
  client.destroy();
  process.send?.(endpoint);
}

/** 100 MB in 64 KiB chunks cycled from 1 MiB of random bytes (cheap to make, not compressible). */
async function* content(): AsyncGenerator<Buffer> {
  const pool = randomBytes(MiB);
  for (let sent = 0; sent < SIZE; ) {
    const size = Math.min(64 * 1024, SIZE - sent);
    const offset = sent % (pool.length - size);
    yield pool.subarray(offset, offset + size);
    sent += size;
  }
}

/** The data directory's spool, for comparison (durable: fdatasync, rename, directory fsync). */
async function localSpool(): Promise<Pick<ContentSpool, 'read' | 'remove'> & LocalWrite> {
  const { LocalSpool } = await import('../src/spool/local-spool.js');
  const dir = mkdtempSync(join(tmpdir(), 'assay-spool-bench-'));
  const spool = new LocalSpool(join(dir, 'spool'));
  await spool.init();
  return {
    write: (key, source, maxBytes) => spool.write(key, source, maxBytes),
    read: (key) => spool.read(key),
    remove: async () => rmSync(dir, { recursive: true, force: true }),
    close: () => {},
  };
}

type LocalWrite = {
  write(key: string, source: AsyncIterable<Buffer>, maxBytes: number): Promise<unknown>;
  close(): void;
};

/** Client mode: one write and one read of SIZE bytes; prints a line of JSON. */
async function client(endpoint: string, partSize: number, queueSize: number): Promise<void> {
  const { S3Spool } = await import('../src/spool/s3-spool.js');
  const spool =
    endpoint === 'local'
      ? await localSpool()
      : new S3Spool({
          bucket: 'bench-spool',
          prefix: 'bench',
          endpoint,
          region: 'us-east-1',
          partSize,
          queueSize,
        });
  const rssBefore = process.memoryUsage().rss;
  const key = randomBytes(16).toString('hex');
  let started = performance.now();
  const cpuBefore = process.cpuUsage();
  await spool.write(key, content(), SIZE);
  const writeSeconds = (performance.now() - started) / 1000;
  const cpu = process.cpuUsage(cpuBefore);
  const writeCpu = (cpu.user + cpu.system) / 1e6;
  const writePeak = process.resourceUsage().maxRSS * 1024;
  started = performance.now();
  let read = 0;
  for await (const chunk of spool.read(key)) read += (chunk as Buffer).length;
  const readSeconds = (performance.now() - started) / 1000;
  if (read !== SIZE) throw new Error(`read ${read} bytes of ${SIZE}`);
  await spool.remove(key);
  spool.close();
  const peak = process.resourceUsage().maxRSS * 1024;
  console.log(JSON.stringify({ rssBefore, writeSeconds, writeCpu, writePeak, readSeconds, peak }));
}

async function main(): Promise<void> {
  const env = {
    ...process.env,
    AWS_ACCESS_KEY_ID: 'bench',
    AWS_SECRET_ACCESS_KEY: 'bench',
    AWS_EC2_METADATA_DISABLED: 'true',
  };
  const server = fork(import.meta.filename, ['serve'], { execArgv: ['--import', 'tsx'], env });
  const endpoint = await new Promise<string>((resolve) => server.once('message', resolve));
  const mib = (bytes: number): string => (bytes / MiB).toFixed(0);
  for (const [partSize, queueSize] of [
    [8 * MiB, 2],
    [5 * MiB, 1],
    [0, 0],
  ] as const) {
    const target = partSize === 0 ? 'local' : endpoint;
    const output = execFileSync(
      process.execPath,
      ['--import', 'tsx', import.meta.filename, 'client', target, `${partSize}`, `${queueSize}`],
      { env, encoding: 'utf8' },
    );
    const r = JSON.parse(output) as Record<string, number>;
    const rate = (seconds = 0): string => (SIZE / MB / seconds).toFixed(0);
    const name =
      partSize === 0 ? 'local directory' : `S3, ${mib(partSize)} MiB parts, ${queueSize} at once`;
    console.log(
      `${name}: write ${rate(r.writeSeconds)} MB/s (${(r.writeCpu ?? 0).toFixed(2)} s CPU), peak RSS ${mib(r.writePeak ?? 0)} MiB (${mib(r.rssBefore ?? 0)} MiB before); read ${rate(r.readSeconds)} MB/s, peak RSS ${mib(r.peak ?? 0)} MiB`,
    );
  }
  server.kill();
}

const [mode, ...args] = process.argv.slice(2);
if (mode === 'serve') await serve();
else if (mode === 'client') await client(args[0] ?? '', Number(args[1]), Number(args[2]));
else await main();
