/**
 * `npm run bench:peer -- <peer checkout>`: Assay's synchronous upload against the most used lean
 * self-hosted peer, benzino77/clamav-rest-api (Express, express-fileupload, clamscan; it stores,
 * hashes and detects nothing), on one clamd over TCP, side by side in one run. Not a test.
 *
 * The peer is fetched and `npm install`ed outside this repository (never committed):
 *   git clone https://github.com/benzino77/clamav-rest-api /tmp/peer && (cd /tmp/peer && npm install)
 *   npm run bench:peer -- /tmp/peer        (or BENCH_PEER_DIR=/tmp/peer)
 *
 * Per size: after a round of each that is not counted (the load's code paths warm), rounds
 * alternate between the two services (BENCH_ROUNDS, 3 by default), each round
 * fresh random content unique per file (clamd caches clean verdicts by hash); reported are the
 * medians of the rounds: files/s, the CPU per file of Assay, the peer and clamd (from /proc, all
 * threads), and the peak RSS of each service over the whole run. Both run as deployed, but quiet:
 * Assay at log level warn, the peer's request log (morgan) to /dev/null. BENCH_ONLY picks sizes
 * (4kb, 64kb, 1mb, 10mb).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ClamdClient, parseClamdAddress } from '../src/engines/clamav/clamd-client.js';
import { findClamdBinary } from '../src/engines/clamav/managed-clamd.js';
import { closeClients, uploadToAssay } from './clients.js';
import { cpuSeconds, freePort, memoryOf, startAssay, startBenchClamd } from './service-process.js';
import { median, runConcurrently, summarise } from './stats.js';
import { tagContent } from './unique-content.js';

const KB = 1024;
const MB = 1024 * KB;
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);

interface Size {
  key: string;
  label: string;
  size: number;
  count: number;
  concurrency: number;
}

const SIZES: Size[] = [
  { key: '4kb', label: '4 KB, c=8', size: 4 * KB, count: 3000, concurrency: 8 },
  { key: '64kb', label: '64 KB, c=8', size: 64 * KB, count: 1500, concurrency: 8 },
  { key: '1mb', label: '1 MB, c=4', size: MB, count: 200, concurrency: 4 },
  { key: '10mb', label: '10 MB, c=1', size: 10 * MB, count: 12, concurrency: 1 },
];

type Service = 'assay' | 'peer';

interface Run {
  assayUrl: string;
  peerUrl: string;
  pids: { assay: number; peer: number; clamd: number };
}

interface Rounds {
  perSecond: number[];
  cpu: number[];
  clamdCpu: number[];
}

async function waitForHttp(url: string, child: ChildProcess, name: string): Promise<void> {
  for (let i = 0; i < 200; i++) {
    if (child.exitCode !== null) throw new Error(`${name} exited with ${child.exitCode}`);
    try {
      await fetch(url);
      return;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${name} did not start listening`);
}

/**
 * clamd on TCP loopback, the peer's only transport: the benchmark's managed clamd prepares the
 * database and its config, then the same clamd binary runs that config with a TCP socket instead.
 */
async function startTcpClamd(dir: string): Promise<{ child: ChildProcess; port: number }> {
  const managed = await startBenchClamd(dir);
  const config = readFileSync(join(dir, 'clamd-home', 'clamd', 'clamd.conf'), 'utf8');
  await managed.clamd.stop();
  const port = await freePort();
  const tcpConfig = join(dir, 'clamd-tcp.conf');
  writeFileSync(
    tcpConfig,
    config
      .split('\n')
      .filter((line) => !/^(LocalSocket|LocalSocketMode|FixStaleSocket)\b/.test(line))
      .concat([`TCPSocket ${port}`, 'TCPAddr 127.0.0.1', ''])
      .join('\n'),
  );
  const clamdPath = findClamdBinary();
  if (clamdPath === null) throw new Error('clamd is not installed (./setup.sh)');
  const child = spawn(clamdPath, ['-c', tcpConfig], { stdio: ['ignore', 'ignore', 'inherit'] });
  const client = new ClamdClient(parseClamdAddress(`tcp://127.0.0.1:${port}`));
  for (let i = 0; i < 600; i++) {
    if (child.exitCode !== null) throw new Error(`clamd exited with ${child.exitCode}`);
    const ready = await client.ping().then(
      () => true,
      () => false,
    );
    if (ready) return { child, port };
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error('clamd did not answer PING');
}

function startPeer(peerDir: string, port: number, clamdPort: number): ChildProcess {
  return spawn(process.execPath, ['src/app.js'], {
    cwd: peerDir,
    env: {
      PATH: process.env.PATH,
      NODE_ENV: 'production',
      APP_PORT: String(port),
      APP_FORM_KEY: 'FILES',
      APP_MAX_FILE_SIZE: String(100 * MB),
      APP_MAX_FILES_NUMBER: '4',
      CLAMD_IP: '127.0.0.1',
      CLAMD_PORT: String(clamdPort),
      CLAMD_TIMEOUT: '60000',
    },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
}

function upload(run: Run, service: Service, content: Buffer): Promise<void> {
  return service === 'assay'
    ? uploadToAssay(run.assayUrl, content)
    : uploadToAssay(run.peerUrl, content, {
        path: '/api/v1/scan',
        status: 200,
        field: 'FILES',
        auth: null,
      });
}

async function benchSize(size: Size, run: Run): Promise<Record<Service, Rounds>> {
  console.log(`== ${size.label} (${size.count} files a round)`);
  const rounds: Record<Service, Rounds> = {
    assay: { perSecond: [], cpu: [], clamdCpu: [] },
    peer: { perSecond: [], cpu: [], clamdCpu: [] },
  };
  const contents = Array.from({ length: Math.min(size.count, 64) }, () => randomBytes(size.size));
  let tag = 0;
  // File i of the round tagged `roundTag`: unique in the whole run.
  const contentOf = (i: number, roundTag: number) => {
    const content = contents[i % contents.length] as Buffer;
    return tagContent(content, i, roundTag);
  };
  // One round of each, not counted, at this size and concurrency: the code paths of this load
  // (V8's optimised code, group commits, pooled buffers) settle before either service is timed.
  for (const service of ['assay', 'peer'] as const) {
    const warmTag = ++tag;
    await runConcurrently(size.count, size.concurrency, (i) =>
      upload(run, service, contentOf(i, warmTag)),
    );
  }
  console.log(`  (a round of each first, not counted)`);
  for (let round = 0; round < ROUNDS; round++) {
    // The order swaps each round, so neither service always runs on a machine the other warmed.
    const order: Service[] = round % 2 === 0 ? ['assay', 'peer'] : ['peer', 'assay'];
    for (const service of order) {
      const roundTag = ++tag;
      const pid = run.pids[service];
      const before = [cpuSeconds(pid), cpuSeconds(run.pids.clamd)];
      const { latencies, seconds } = await runConcurrently(size.count, size.concurrency, (i) =>
        upload(run, service, contentOf(i, roundTag)),
      );
      const stats = summarise(latencies, seconds, size.size);
      const [cpu, clamdCpu] = [cpuSeconds(pid), cpuSeconds(run.pids.clamd)].map(
        (after, i) => ((after - (before[i] ?? 0)) * 1000) / size.count,
      ) as [number, number];
      rounds[service].perSecond.push(stats.perSecond);
      rounds[service].cpu.push(cpu);
      rounds[service].clamdCpu.push(clamdCpu);
      console.log(
        `  round ${round + 1} ${service.padEnd(5)} ${stats.perSecond.toFixed(1).padStart(8)} files/s` +
          `  p50 ${stats.p50.toFixed(1).padStart(7)} ms  cpu ms/file: ${service} ${cpu.toFixed(2)}` +
          `  clamd ${clamdCpu.toFixed(2)}  rss ${memoryOf(pid).rssMb.toFixed(0)} MB`,
      );
    }
  }
  return rounds;
}

async function main(): Promise<void> {
  const peerDir = process.argv[2] ?? process.env.BENCH_PEER_DIR;
  if (peerDir === undefined || !existsSync(join(peerDir, 'src', 'app.js'))) {
    console.error(
      'usage: npm run bench:peer -- <checkout of benzino77/clamav-rest-api, npm installed>',
    );
    process.exit(2);
  }
  if (!existsSync(join(peerDir, 'node_modules', 'express-fileupload'))) {
    console.error(`${peerDir}: run npm install there first`);
    process.exit(2);
  }
  const only = process.env.BENCH_ONLY?.split(',');
  const sizes = SIZES.filter((size) => only === undefined || only.includes(size.key));
  const dir = mkdtempSync(join(tmpdir(), 'assay-bench-peer-'));
  const children: ChildProcess[] = [];
  try {
    const clamd = await startTcpClamd(dir);
    children.push(clamd.child);
    const clamdAddress = `tcp://127.0.0.1:${clamd.port}`;
    const assay = await startAssay(clamdAddress, join(dir, 'assay'));
    children.push(assay.child);
    const peerPort = await freePort();
    const peer = startPeer(peerDir, peerPort, clamd.port);
    children.push(peer);
    const peerUrl = `http://127.0.0.1:${peerPort}`;
    await waitForHttp(`${peerUrl}/api/v1/version`, peer, 'the peer');
    const run: Run = {
      assayUrl: assay.url,
      peerUrl,
      pids: { assay: assay.child.pid ?? 0, peer: peer.pid ?? 0, clamd: clamd.child.pid ?? 0 },
    };
    // Warm both (JIT, connections, the first scans' allocations) before the clock runs.
    const warm = randomBytes(4 * KB);
    for (let i = 0; i < 200; i++) {
      tagContent(warm, i);
      await upload(run, 'assay', warm);
      await upload(run, 'peer', warm);
    }
    const lines: string[] = [];
    for (const size of sizes) {
      const { assay: a, peer: p } = await benchSize(size, run);
      const [aRate, pRate, aCpu, pCpu] = [a.perSecond, p.perSecond, a.cpu, p.cpu].map(median) as [
        number,
        number,
        number,
        number,
      ];
      const clamdCpu = median([...a.clamdCpu, ...p.clamdCpu]);
      lines.push(
        `| ${size.label} | ${aRate.toFixed(1)} | ${pRate.toFixed(1)} | ${(aRate / pRate).toFixed(2)} ` +
          `| ${aCpu.toFixed(2)} ms | ${pCpu.toFixed(2)} ms | ${(aCpu / pCpu).toFixed(2)} | ${clamdCpu.toFixed(2)} ms |`,
      );
    }
    console.log('');
    console.log(`medians of ${ROUNDS} alternating rounds; CPU per file from /proc (all threads)`);
    console.log(
      '| size, concurrency | Assay files/s | peer files/s | ratio | Assay CPU/file | peer CPU/file | CPU ratio | clamd CPU/file |',
    );
    console.log('|---|---|---|---|---|---|---|---|');
    for (const line of lines) console.log(line);
    const assayPeak = memoryOf(run.pids.assay).peakMb;
    const peerPeak = memoryOf(run.pids.peer).peakMb;
    console.log(
      `peak RSS: Assay ${assayPeak.toFixed(0)} MB, peer ${peerPeak.toFixed(0)} MB ` +
        `(ratio ${(assayPeak / peerPeak).toFixed(2)})`,
    );
  } finally {
    closeClients();
    for (const child of children.reverse()) {
      child.kill('SIGTERM');
      if (child.exitCode === null) await new Promise((r) => child.once('exit', r));
    }
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
