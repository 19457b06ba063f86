/**
 * `npm run bench:clamd-sessions`: the clamd client with pooled sessions (IDSESSION) against a
 * connection per scan, side by side in one run on the same managed clamd, over its unix socket
 * and over TCP (through a relay process, as a remote clamd would be reached). Per size: files/s,
 * and the client's and clamd's CPU per file. Sessions take every size here (`sessionMaxBytes`
 * above the largest), to show where they stop paying. Not a test: it prints numbers.
 *
 * BENCH_ROUNDS (3), BENCH_SMALL_FILES (3000: the 4 KB count; larger sizes take fewer).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { type ClamdAddress, ClamdClient } from '../src/engines/clamav/clamd-client.js';
import { findClamdBinary, ManagedClamd } from '../src/engines/clamav/managed-clamd.js';
import { cpuSeconds } from './service-process.js';
import { runConcurrently } from './stats.js';
import { tagContent } from './unique-content.js';

const KB = 1024;
const MB = 1024 * KB;
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const SMALL_FILES = Number(process.env.BENCH_SMALL_FILES ?? 3000);

interface Size {
  name: string;
  bytes: number;
  count: number;
  concurrency: number;
}

const SIZES: Size[] = [
  { name: '4 KB', bytes: 4 * KB, count: SMALL_FILES, concurrency: 8 },
  { name: '64 KB', bytes: 64 * KB, count: Math.ceil(SMALL_FILES / 3), concurrency: 8 },
  { name: '256 KB', bytes: 256 * KB, count: Math.ceil(SMALL_FILES / 10), concurrency: 8 },
  { name: '1 MB', bytes: MB, count: Math.ceil(SMALL_FILES / 30), concurrency: 8 },
  { name: '10 MB', bytes: 10 * MB, count: 10, concurrency: 1 },
];

// A TCP relay to a unix socket, run as its own process so its CPU is not counted as the client's.
const RELAY = `
const net = require('node:net');
const server = net.createServer((client) => {
  const upstream = net.connect(process.argv[1]);
  client.setNoDelay(true);
  client.on('error', () => upstream.destroy());
  upstream.on('error', () => client.destroy());
  client.pipe(upstream).pipe(client);
});
server.listen(0, '127.0.0.1', () => console.log(server.address().port));
`;

/** clamd over TCP, as a remote clamd would be reached: connect, Nagle and FIN are measured too. */
async function tcpRelay(path: string): Promise<{ child: ChildProcess; port: number }> {
  const child = spawn(process.execPath, ['-e', RELAY, path], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const port = await new Promise<number>((resolve, reject) => {
    child.once('exit', () => reject(new Error('the TCP relay exited')));
    child.stdout?.once('data', (data: Buffer) => resolve(Number(data.toString().trim())));
  });
  return { child, port };
}

async function scan(client: ClamdClient, content: Buffer): Promise<void> {
  const stream = client.instream();
  // 64 KB chunks, as an upload arrives.
  for (let at = 0; at < content.length; at += 64 * KB) {
    await stream.write(content.subarray(at, at + 64 * KB));
  }
  const verdict = await stream.finish();
  if (verdict.signature !== null) throw new Error(`unexpected finding ${verdict.signature}`);
}

async function main() {
  const clamdPath = findClamdBinary();
  if (clamdPath === null) throw new Error('clamd is not installed: run ./setup.sh');
  const work = mkdtempSync(join(tmpdir(), 'assay-bench-sessions-'));
  const managed = new ManagedClamd({
    dataDir: work,
    clamdPath,
    maxFileSize: 100 * MB,
    logger: pino({ level: 'warn' }),
  });
  await managed.start();
  const relay = await tcpRelay(managed.address.kind === 'unix' ? managed.address.path : '');
  const transports: [string, ClamdAddress][] = [
    ['unix socket', managed.address],
    ['TCP', { kind: 'tcp', host: '127.0.0.1', port: relay.port }],
  ];
  const summary: string[] = [];
  try {
    for (const [transport, address] of transports) {
      const clients = {
        connection: new ClamdClient(address, { sessions: 0 }),
        sessions: new ClamdClient(address, { sessionMaxBytes: 16 * MB }),
      };
      for (const size of SIZES) {
        console.log(`== ${size.name}, concurrency ${size.concurrency}, over ${transport}`);
        const best: Record<string, { perSecond: number; clientMs: number; clamdMs: number }> = {};
        for (let round = 0; round < ROUNDS; round++) {
          for (const [name, client] of Object.entries(clients)) {
            const contents = Array.from({ length: Math.min(size.count, 32) }, () =>
              randomBytes(size.bytes),
            );
            const before = [process.cpuUsage(), cpuSeconds(managed.pid ?? 0)] as const;
            const { seconds } = await runConcurrently(size.count, size.concurrency, (i) => {
              const content = contents[i % contents.length] as Buffer;
              // Unique per file: clamd caches clean verdicts by hash.
              tagContent(content, i, round * 2 + (name === 'sessions' ? 1 : 0));
              return scan(client, content);
            });
            const own = process.cpuUsage(before[0]);
            const clientMs = (own.user + own.system) / 1000 / size.count;
            const clamdMs = ((cpuSeconds(managed.pid ?? 0) - before[1]) * 1000) / size.count;
            const perSecond = size.count / seconds;
            console.log(
              `  round ${round + 1} ${name.padEnd(10)} ${perSecond.toFixed(1).padStart(8)} files/s` +
                `  cpu ms/file: client ${clientMs.toFixed(3)}  clamd ${clamdMs.toFixed(2)}`,
            );
            const previous = best[name];
            if (previous === undefined || perSecond > previous.perSecond) {
              best[name] = { perSecond, clientMs, clamdMs };
            }
          }
        }
        const { connection, sessions } = best;
        if (connection !== undefined && sessions !== undefined) {
          summary.push(
            `${size.name} over ${transport}: sessions/connection throughput ${(sessions.perSecond / connection.perSecond).toFixed(2)}; ` +
              `client cpu ms/file ${connection.clientMs.toFixed(3)} -> ${sessions.clientMs.toFixed(3)}, ` +
              `clamd ${connection.clamdMs.toFixed(2)} -> ${sessions.clamdMs.toFixed(2)} (best rounds)`,
          );
        }
      }
      clients.sessions.close();
    }
    console.log('== summary');
    for (const line of summary) console.log(`  ${line}`);
  } finally {
    relay.child.kill();
    await managed.stop();
    rmSync(work, { recursive: true, force: true });
  }
}

await main();
