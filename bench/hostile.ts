/**
 * `npm run bench:hostile`: hostile and normal traffic against one Assay process for
 * HOSTILE_SECONDS (default 300), while a probe pings `/v2.2/ping` every 50 ms. Not a test: it
 * prints, per 30 s window, the ping latency (p50, p99, max, failures) and what the normal
 * client got, then the hostile traffic's answers by status.
 *
 * Hostile traffic comes from 127.0.0.2 (wrong secrets from 127.0.0.3) with its own account's key
 * and a rate limit of 2,000/s, so its content reaches the engines; normal traffic and the probe
 * come from 127.0.0.1, in a worker thread of their own:
 * - regular-expression bombs (`<?xml?>` and 40 empty comments) on v2.2 sync and async, v1.0
 *   sync and a fetch of one;
 * - slow clients that send headers and a part of a body, then a byte every few seconds;
 * - 30 MB random uploads, two at a time;
 * - malformed multipart, two `file` parts, oversize declared lengths, wrong secrets;
 * - fetches of a server that never answers and of one that stops mid-body, with callbacks to a
 *   receiver that never answers;
 * - a PNG decompression bomb and 200 KB of near-miss text for the NSFW engines.
 *
 * HOSTILE_ONLY=bombs,slow,large,malformed,fetches,image-bomb,near-miss picks some of them.
 */

import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { Agent, createServer as createHttpServer, request } from 'node:http';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import { pngBomb } from '../test/helpers/images.js';
import { startOwnClamd } from './local-parts.js';
import { cpuSeconds, memoryOf, startAssay } from './service-process.js';
import { percentile } from './stats.js';

const SECONDS = Number(process.env.HOSTILE_SECONDS ?? 300);
const WINDOW_S = 30;
const BOUNDARY = 'hostile-boundary';
const NORMAL = `Basic ${Buffer.from('bench:bench-secret').toString('base64')}`;
const MB = 1024 * 1024;

const deadline: number = isMainThread
  ? Date.now() + SECONDS * 1000
  : (workerData as { deadline: number }).deadline;
const running = () => Date.now() < deadline;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Answers of the hostile traffic by kind and status ("error" when the connection failed). */
const hostileOutcomes = new Map<string, Map<string, number>>();
function count(kind: string, outcome: string): void {
  const byOutcome = hostileOutcomes.get(kind) ?? new Map<string, number>();
  byOutcome.set(outcome, (byOutcome.get(outcome) ?? 0) + 1);
  hostileOutcomes.set(kind, byOutcome);
}

interface Sample {
  at: number;
  ms: number;
  ok: boolean;
}
type SampleKind = 'ping' | 'upload' | 'async';
const samples: Record<SampleKind, Sample[]> = { ping: [], upload: [], async: [] };

interface Answer {
  status: number;
  body: string;
}

/** One HTTP request; never rejects for a refused or reset connection (status 0). */
function send(
  url: string,
  options: {
    method?: string;
    headers?: Record<string, string | number>;
    body?: Buffer | string;
    localAddress?: string;
    agent?: Agent;
    timeoutMs?: number;
  },
): Promise<Answer> {
  return new Promise((resolve) => {
    const req = request(url, {
      method: options.method ?? 'GET',
      headers: options.headers,
      localAddress: options.localAddress,
      agent: options.agent ?? false,
    });
    const timer = setTimeout(
      () => req.destroy(new Error('client timeout')),
      options.timeoutMs ?? 120_000,
    );
    req.on('response', (response) => {
      const chunks: Buffer[] = [];
      response.on('data', (chunk: Buffer) => chunks.push(chunk));
      response.on('end', () => {
        clearTimeout(timer);
        resolve({ status: response.statusCode ?? 0, body: Buffer.concat(chunks).toString() });
      });
      response.on('error', () => resolve({ status: 0, body: '' }));
    });
    req.on('error', () => {
      clearTimeout(timer);
      resolve({ status: 0, body: '' });
    });
    req.end(options.body);
  });
}

function multipart(
  parts: Array<{ name: string; value: Buffer | string; filename?: string }>,
): Buffer {
  const pieces: Buffer[] = [];
  for (const part of parts) {
    const filename = part.filename === undefined ? '' : `; filename="${part.filename}"`;
    pieces.push(
      Buffer.from(
        `--${BOUNDARY}\r\nContent-Disposition: form-data; name="${part.name}"${filename}\r\n\r\n`,
      ),
      Buffer.from(part.value),
      Buffer.from('\r\n'),
    );
  }
  pieces.push(Buffer.from(`--${BOUNDARY}--\r\n`));
  return Buffer.concat(pieces);
}

const MULTIPART = `multipart/form-data; boundary=${BOUNDARY}`;

/** HOSTILE_ONLY=bombs,slow (names of hostile workloads) runs just those beside the normal client. */
const ONLY = process.env.HOSTILE_ONLY?.split(',').map((name) => name.trim());

function hostileLoop(name: string, parallel: number, task: () => Promise<void>): Promise<void> {
  return ONLY === undefined || ONLY.includes(name) ? loop(parallel, task) : Promise.resolve();
}

/** Runs `task` in `parallel` loops until the deadline. */
async function loop(parallel: number, task: () => Promise<void>): Promise<void> {
  await Promise.all(
    Array.from({ length: parallel }, async () => {
      while (running()) await task();
    }),
  );
}

function adminJson(dataDir: string, args: string[]): Record<string, string> {
  const out = execFileSync(process.execPath, ['bin/assay.js', 'admin', ...args, '--json'], {
    env: { ...process.env, ASSAY_DATA_DIR: dataDir, ASSAY_LOG_LEVEL: 'silent' },
  });
  return JSON.parse(out.toString()) as Record<string, string>;
}

/** Local servers the hostile fetches and callbacks point at. */
async function startRemotes(): Promise<{ url: string; close(): void }> {
  const held: Array<{ destroy(): void }> = [];
  const bomb = `<?xml?>${'<!---->'.repeat(40)}`;
  const server = createHttpServer((req, res) => {
    held.push(req.socket);
    if (req.url === '/bomb.xml') {
      res.end(bomb);
    } else if (req.url === '/stall') {
      res.writeHead(200, { 'content-length': '20' });
      res.write('0123456789'); // and nothing more
    }
    // /hang and /callback: never answered
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  return {
    url: `http://127.0.0.1:${port}`,
    close() {
      for (const socket of held) socket.destroy();
      server.close();
    },
  };
}

/** A client that sends its headers and a little of its body, then a byte every 5 s. */
async function slowClient(url: URL, auth: string): Promise<void> {
  await new Promise<void>((resolve) => {
    const socket: Socket = connect({
      host: url.hostname,
      port: Number(url.port),
      localAddress: '127.0.0.2',
    });
    let timer: NodeJS.Timeout | undefined;
    let done = false;
    const finish = (outcome: string) => {
      if (done) return;
      done = true;
      clearInterval(timer);
      socket.destroy();
      count('slow client', outcome);
      if (!outcome.startsWith('answered')) resolve();
    };
    socket.on('connect', () => {
      socket.write(
        `POST /v2.2/files HTTP/1.1\r\nHost: ${url.host}\r\nAuthorization: ${auth}\r\n` +
          `Content-Type: ${MULTIPART}\r\nContent-Length: 10000000\r\n\r\n` +
          `--${BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="f"\r\n\r\n`,
      );
      timer = setInterval(() => {
        if (!running()) finish('stopped by the run');
        else socket.write('x');
      }, 5000);
    });
    // Refused, it waits a second before it tries again: it wants held sockets, not refusals.
    socket.on('data', (data: Buffer) => {
      finish(`answered ${data.toString().split(' ')[1] ?? '?'}`);
      setTimeout(resolve, 1000);
    });
    socket.on('close', () => finish('closed by server'));
    socket.on('error', () => finish('error'));
  });
}

/**
 * The normal client and the probe, in a worker thread of their own: the hostile generators' CPU in
 * the main thread (30 MB bodies, thousands of reconnects) must not delay what is being measured.
 */
async function normalTraffic(url: string, record: (kind: SampleKind, sample: Sample) => void) {
  const normalAgent = new Agent({ keepAlive: true, maxSockets: 8 });
  const probeAgent = new Agent({ keepAlive: true, maxSockets: 1 });
  await Promise.all([
    // The probe: one ping every 50 ms on a kept-alive connection, as a health checker would.
    loop(1, async () => {
      const t0 = performance.now();
      const answer = await send(`${url}/v2.2/ping`, {
        headers: { authorization: NORMAL },
        agent: probeAgent,
        timeoutMs: 10_000,
      });
      record('ping', { at: Date.now(), ms: performance.now() - t0, ok: answer.status === 200 });
      await sleep(50);
    }),
    // A normal client: 4 KB sync uploads, two at a time, ~40/s.
    loop(2, async () => {
      const t0 = performance.now();
      const answer = await send(`${url}/v2.2/files`, {
        method: 'POST',
        headers: { authorization: NORMAL, 'content-type': MULTIPART },
        body: multipart([{ name: 'file', value: randomBytes(4096), filename: 'f.bin' }]),
        agent: normalAgent,
      });
      record('upload', { at: Date.now(), ms: performance.now() - t0, ok: answer.status === 201 });
      await sleep(50);
    }),
    // A normal async client: upload, then poll until the result is there.
    loop(1, async () => {
      const t0 = performance.now();
      const answer = await send(`${url}/v2.2/files/async`, {
        method: 'POST',
        headers: { authorization: NORMAL, 'content-type': MULTIPART },
        body: multipart([{ name: 'file', value: randomBytes(4096), filename: 'f.bin' }]),
        agent: normalAgent,
      });
      let ok = false;
      if (answer.status === 202) {
        const id = (JSON.parse(answer.body) as { id: string }).id;
        while (running()) {
          const result = await send(`${url}/v2.2/files/${id}`, {
            headers: { authorization: NORMAL },
            agent: normalAgent,
          });
          if (result.status === 200) {
            ok = !result.body.includes('"error"');
            break;
          }
          await sleep(100);
        }
      }
      record('async', { at: Date.now(), ms: performance.now() - t0, ok });
      await sleep(500);
    }),
  ]);
  normalAgent.destroy();
  probeAgent.destroy();
}

async function main(): Promise<void> {
  const work = mkdtempSync(join(tmpdir(), 'assay-hostile-'));
  const { clamd: managed, socket } = await startOwnClamd(work, { maxFileSize: 200 * MB });
  const dataDir = join(work, 'assay');
  const account = adminJson(dataDir, ['account', 'create', '--name', 'Hostile']);
  const key = adminJson(dataDir, ['key', 'create', '--account', account.id ?? '']);
  // The attacker's key has a high rate limit of its own, so its content reaches the engines.
  execFileSync(
    process.execPath,
    ['bin/assay.js', 'admin', 'key', 'update', key.key ?? '', '--rate-limit', '2000'],
    { env: { ...process.env, ASSAY_DATA_DIR: dataDir, ASSAY_LOG_LEVEL: 'silent' } },
  );
  const hostile = `Basic ${Buffer.from(`${key.key}:${key.secret}`).toString('base64')}`;
  const remotes = await startRemotes();
  // Default limits, but the normal client's own rate stays under its key's limit.
  const assay = await startAssay(socket, dataDir, {
    ASSAY_RATE_LIMIT: '100',
    ASSAY_RATE_BURST: '200',
    ASSAY_LOG_LEVEL: 'error',
  });
  const pid = assay.child.pid ?? 0;
  const base = new URL(assay.url);
  console.log(
    `assay pid ${pid} at ${assay.url}, clamd pid ${managed.pid}; ${SECONDS} s of traffic\n`,
  );
  const started = Date.now();
  const cpuAtStart = cpuSeconds(pid);
  let peakRss = 0;
  const memoryTimer = setInterval(() => {
    peakRss = Math.max(peakRss, memoryOf(pid).rssMb);
  }, 1000);

  const normal = new Worker(new URL(import.meta.url), {
    workerData: { url: assay.url, deadline },
  });
  normal.on('message', ({ kind, sample }: { kind: SampleKind; sample: Sample }) => {
    samples[kind].push(sample);
  });
  const normalDone = new Promise((resolve) => normal.once('exit', resolve));
  const bomb = `<?xml?>${'<!---->'.repeat(40)}`;
  const nearMiss = Array.from({ length: 20_000 }, (_, i) => `a55c${i.toString(16)} class `).join(
    '',
  );
  const png = pngBomb(30_000, 30_000);
  const large = multipart([{ name: 'file', value: randomBytes(30 * MB), filename: 'big.bin' }]);
  const fromAttacker = { localAddress: '127.0.0.2' };

  const workloads: Array<Promise<void>> = [
    // Regular-expression bombs through every door.
    hostileLoop('bombs', 2, async () => {
      for (const [kind, path, body, type] of [
        [
          'xml bomb v2.2 sync',
          '/v2.2/files',
          multipart([{ name: 'file', value: bomb, filename: 'b.xml' }]),
          MULTIPART,
        ],
        [
          'xml bomb v2.2 async',
          '/v2.2/files/async',
          multipart([{ name: 'file', value: bomb, filename: 'b.xml' }]),
          MULTIPART,
        ],
        ['xml bomb v1.0 sync', '/api/scan/', bomb, 'application/octet-stream'],
        [
          'xml bomb fetch',
          '/v2.2/files/fetch',
          `location=${encodeURIComponent(`${remotes.url}/bomb.xml`)}`,
          'application/x-www-form-urlencoded',
        ],
      ] as const) {
        const answer = await send(`${assay.url}${path}`, {
          method: 'POST',
          headers: { authorization: hostile, 'content-type': type },
          body,
          ...fromAttacker,
        });
        count(kind, String(answer.status));
      }
      await sleep(200);
    }),
    // Slow clients: 40 at a time, each holding a socket as long as the service lets it.
    hostileLoop('slow', 40, () => slowClient(base, hostile)),
    // Large uploads: 30 MB of random data, two at a time.
    hostileLoop('large', 2, async () => {
      // Fresh 16 bytes make each body new to clamd's cache without 30 MB of randomBytes each.
      randomBytes(16).copy(large, 200);
      const answer = await send(`${assay.url}/v2.2/files`, {
        method: 'POST',
        headers: { authorization: hostile, 'content-type': MULTIPART },
        body: large,
        ...fromAttacker,
      });
      count('30 MB upload', String(answer.status));
      if (answer.status !== 201) await sleep(200); // refused: try again, not in a tight loop
    }),
    // Malformed and refused requests.
    hostileLoop('malformed', 1, async () => {
      const cases: Array<[string, Record<string, string | number>, Buffer | string]> = [
        [
          'malformed multipart',
          { 'content-type': MULTIPART },
          `--${BOUNDARY}\r\ngarbage${'\r\n'.repeat(1000)}`,
        ],
        [
          'two file parts',
          { 'content-type': MULTIPART },
          multipart([
            { name: 'file', value: 'a', filename: 'a' },
            { name: 'file', value: 'b', filename: 'b' },
          ]),
        ],
        ['declared 10 GB', { 'content-type': MULTIPART, 'content-length': 10 * 1024 * MB }, ''],
        [
          'bad metadata',
          { 'content-type': MULTIPART },
          multipart([
            { name: 'file', value: 'x', filename: 'x' },
            { name: `metadata[${'k'.repeat(5000)}]`, value: 'v' },
          ]),
        ],
      ];
      for (const [kind, headers, body] of cases) {
        const answer = await send(`${assay.url}/v2.2/files/async`, {
          method: 'POST',
          headers: { authorization: hostile, ...headers },
          body: kind === 'declared 10 GB' ? randomBytes(MB) : body,
          ...fromAttacker,
          timeoutMs: 30_000,
        });
        count(kind, String(answer.status));
      }
      const wrong = `Basic ${Buffer.from(`${key.key}:wrong-${randomBytes(4).toString('hex')}`).toString('base64')}`;
      count(
        'wrong secret',
        String(
          (
            await send(`${assay.url}/v2.2/ping`, {
              headers: { authorization: wrong },
              // Guessing from an address of its own: its failed-authentication bucket would
              // otherwise refuse the rest of the attacker's traffic too.
              localAddress: '127.0.0.3',
            })
          ).status,
        ),
      );
      await sleep(100);
    }),
    // Fetches of servers that never answer or stop mid-body, with callbacks that never answer.
    hostileLoop('fetches', 1, async () => {
      for (const path of ['/hang', '/stall']) {
        const form = `location=${encodeURIComponent(`${remotes.url}${path}`)}&callback=${encodeURIComponent(`${remotes.url}/callback`)}`;
        const answer = await send(`${assay.url}/v2.2/files/fetch`, {
          method: 'POST',
          headers: { authorization: hostile, 'content-type': 'application/x-www-form-urlencoded' },
          body: form,
          ...fromAttacker,
        });
        count(`fetch ${path}`, String(answer.status));
      }
      await sleep(1000);
    }),
    // The NSFW engines: a decompression bomb and near-miss text.
    ...(
      [
        ['image-bomb', 'png bomb', png, 'bomb.png'],
        ['near-miss', 'near-miss text', nearMiss, 'near.txt'],
      ] as const
    ).map(([name, kind, value, filename]) =>
      hostileLoop(name, 1, async () => {
        const answer = await send(`${assay.url}/v2.2/files`, {
          method: 'POST',
          headers: { authorization: hostile, 'content-type': MULTIPART },
          body: multipart([{ name: 'file', value, filename }]),
          ...fromAttacker,
        });
        count(kind, String(answer.status));
        await sleep(500);
      }),
    ),
  ];

  const reporter = setInterval(() => report(started, false), WINDOW_S * 1000);
  await Promise.all([...workloads, normalDone]);
  clearInterval(reporter);
  clearInterval(memoryTimer);
  const cpu = cpuSeconds(pid) - cpuAtStart;
  report(started, true);
  console.log('\nhostile traffic, answers by status:');
  for (const [kind, outcomes] of hostileOutcomes) {
    const list = [...outcomes].map(([outcome, n]) => `${outcome} x${n}`).join(', ');
    console.log(`  ${kind.padEnd(22)} ${list}`);
  }
  console.log(
    `\nassay: ${cpu.toFixed(1)} CPU s over ${SECONDS} s, peak RSS ${peakRss.toFixed(0)} MB, still running: ${assay.child.exitCode === null}`,
  );
  assay.child.kill('SIGTERM');
  await new Promise((resolve) => assay.child.once('exit', resolve));
  remotes.close();
  await managed.stop();
  rmSync(work, { recursive: true, force: true });
}

function stats(samples: Sample[]): string {
  const sorted = samples.map((s) => s.ms).sort((a, b) => a - b);
  const failed = samples.filter((s) => !s.ok).length;
  if (sorted.length === 0) return 'none';
  return `n ${String(sorted.length).padStart(5)}  p50 ${percentile(sorted, 50).toFixed(1).padStart(6)}  p99 ${percentile(sorted, 99).toFixed(1).padStart(7)}  max ${(sorted.at(-1) ?? 0).toFixed(0).padStart(6)} ms  failed ${failed}`;
}

function report(started: number, final: boolean): void {
  const windowEnd = Date.now();
  const windowStart = final ? started : windowEnd - WINDOW_S * 1000;
  const within = (s: Sample) => s.at >= windowStart && s.at <= windowEnd;
  const label = final ? 'whole run' : `${Math.round((windowEnd - started) / 1000)} s`.padStart(5);
  console.log(
    `${label}  ping /v2.2/ping      ${stats(samples.ping.filter(within))}\n` +
      `       4 KB sync uploads   ${stats(samples.upload.filter(within))}\n` +
      `       async upload+result ${stats(samples.async.filter(within))}`,
  );
}

if (isMainThread) {
  await main();
} else {
  await normalTraffic((workerData as { url: string }).url, (kind, sample) =>
    parentPort?.postMessage({ kind, sample }),
  );
}
