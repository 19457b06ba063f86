/**
 * `npm run bench:icap`: Assay's ICAP listener against c-icap with its virus_scan module (Debian's
 * `c-icap` and `libc-icap-mod-virus-scan`), side by side in one run on one clamd, so the ratios
 * hold on a shared, noisy machine. Not a test: it prints numbers and checks nothing.
 *
 * Per size (4 KB at concurrency 8, 1 MB at 4, 10 MB at 2), rounds alternate between the two
 * servers, after uncounted warm-up rounds. The load is RESPMOD over persistent connections with `Allow: 204` and no preview (what
 * Nextcloud sends; a proxy adds a preview), fresh random content per request (clamd caches clean
 * verdicts by hash), Assay's verdict cache off. Reported: requests/s of the best round, the median
 * CPU per request of each server (c-icap: its processes together) and of clamd, from /proc, and
 * each server's peak RSS (c-icap: its processes' peaks added).
 *
 * Then c-icap-stretch (the c-icap package's load tool) against each, for the record: it waits
 * between requests itself (about 0.5-1 s a thread), so its numbers measure the tool, not the server.
 *
 * Before the rounds, BENCH_WARMUP (1) uncounted rounds of each server at that size.
 *
 * BENCH_ROUNDS (3), BENCH_ONLY (4kb, 1mb, 10mb, stretch) narrow a run.
 */
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  cpuSeconds,
  freePort,
  memoryOf,
  resetPeakMemory,
  startAssay,
  startBenchClamd,
} from './service-process.js';
import { median } from './stats.js';
import { tagContent } from './unique-content.js';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const WARMUP = Number(process.env.BENCH_WARMUP ?? 1);
const ONLY = (process.env.BENCH_ONLY ?? '').split(',').filter(Boolean);
const wanted = (key: string) => ONLY.length === 0 || ONLY.includes(key);
const KB = 1024;
const MB = 1024 * KB;

interface Scenario {
  key: string;
  size: number;
  concurrency: number;
  requests: number;
}

const SCENARIOS: Scenario[] = [
  { key: '4kb', size: 4 * KB, concurrency: 8, requests: 3000 },
  { key: '1mb', size: MB, concurrency: 4, requests: 200 },
  { key: '10mb', size: 10 * MB, concurrency: 2, requests: 24 },
];

interface Server {
  name: string;
  port: number;
  /** Its processes (c-icap forks several). */
  pids: () => number[];
}

/** One persistent ICAP connection that sends RESPMODs and reads their answers. */
class IcapConnection {
  private buffered: Buffer = Buffer.alloc(0);
  private wake: (() => void) | null = null;
  private closed = false;
  private readonly socket: Socket;

  constructor(port: number) {
    this.socket = connect(port, '127.0.0.1');
    this.socket.setNoDelay(true);
    this.socket.on('data', (data: Buffer) => {
      this.buffered = this.buffered.length === 0 ? data : Buffer.concat([this.buffered, data]);
      this.wake?.();
    });
    this.socket.on('close', () => {
      this.closed = true;
      this.wake?.();
    });
    this.socket.on('error', () => undefined);
  }

  private async until(found: () => number): Promise<number> {
    for (;;) {
      const at = found();
      if (at >= 0) return at;
      if (this.closed) throw new Error('the server closed the connection');
      await new Promise<void>((resolve) => {
        this.wake = resolve;
      });
    }
  }

  /** Sends one RESPMOD of `content`; resolves with the ICAP status once the answer is read. */
  async respmod(content: Buffer): Promise<number> {
    const httpHead = `HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: ${content.length}\r\n\r\n`;
    const head = `RESPMOD icap://127.0.0.1/avscan ICAP/1.0\r\nHost: 127.0.0.1\r\nAllow: 204\r\nEncapsulated: res-hdr=0, res-body=${httpHead.length}\r\n\r\n${httpHead}`;
    this.socket.write(head);
    for (let offset = 0; offset < content.length; offset += 64 * KB) {
      const piece = content.subarray(offset, offset + 64 * KB);
      this.socket.write(`${piece.length.toString(16)}\r\n`);
      this.socket.write(piece);
      if (!this.socket.write('\r\n'))
        await new Promise((resolve) => this.socket.once('drain', resolve));
    }
    this.socket.write('0\r\n\r\n');
    const end = await this.until(() => this.buffered.indexOf('\r\n\r\n'));
    const icapHead = this.buffered.subarray(0, end).toString('latin1');
    this.buffered = this.buffered.subarray(end + 4);
    const status = Number(icapHead.slice(9, 12));
    const body = /(?:res|req)-body=(\d+)/.exec(icapHead);
    const nullBody = /null-body=(\d+)/.exec(icapHead);
    const headsLength = Number(body?.[1] ?? nullBody?.[1] ?? 0);
    await this.until(() => (this.buffered.length >= headsLength ? 0 : -1));
    this.buffered = this.buffered.subarray(headsLength);
    if (body !== null) {
      // A chunked body (c-icap sends data of large objects before its verdict).
      for (;;) {
        const lineEnd = await this.until(() => this.buffered.indexOf('\r\n'));
        const size = Number.parseInt(this.buffered.subarray(0, lineEnd).toString('latin1'), 16);
        this.buffered = this.buffered.subarray(lineEnd + 2);
        await this.until(() => (this.buffered.length >= size + 2 ? 0 : -1));
        this.buffered = this.buffered.subarray(size + 2);
        if (size === 0) break;
      }
    }
    return status;
  }

  close(): void {
    this.socket.destroy();
  }
}

/** CPU seconds of a set of processes (those gone count no more). */
function cpuOf(pids: number[]): number {
  let total = 0;
  for (const pid of pids) {
    try {
      total += cpuSeconds(pid);
    } catch {
      // exited
    }
  }
  return total;
}

function peakOf(pids: number[]): number {
  return pids.reduce((sum, pid) => {
    try {
      return sum + memoryOf(pid).peakMb;
    } catch {
      return sum;
    }
  }, 0);
}

/** One round: `requests` RESPMODs of fresh content over `concurrency` connections. */
async function round(server: Server, scenario: Scenario, clamdPid: number) {
  const contents = Array.from({ length: 16 }, () => randomBytes(scenario.size));
  const connections = Array.from(
    { length: scenario.concurrency },
    () => new IcapConnection(server.port),
  );
  let next = 0;
  let failed = 0;
  const cpuBefore = cpuOf(server.pids());
  const clamdBefore = cpuSeconds(clamdPid);
  const started = performance.now();
  await Promise.all(
    connections.map(async (connection) => {
      for (let i = next++; i < scenario.requests; i = next++) {
        const content = contents[i % contents.length] as Buffer;
        tagContent(content, i, Math.floor(Math.random() * 2 ** 32));
        const status = await connection.respmod(content);
        if (status !== 204 && status !== 200) failed++;
      }
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  for (const connection of connections) connection.close();
  return {
    perSecond: scenario.requests / seconds,
    cpuMs: ((cpuOf(server.pids()) - cpuBefore) * 1000) / scenario.requests,
    clamdMs: ((cpuSeconds(clamdPid) - clamdBefore) * 1000) / scenario.requests,
    failed,
  };
}

/** c-icap's processes: the one started and the servers it forked. */
function processTree(root: number): number[] {
  const pids = [root];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const ppid = Number(stat.split(') ')[1]?.split(' ')[1]);
      if (ppid === root) pids.push(Number(entry));
    } catch {
      // gone
    }
  }
  return pids;
}

async function answersOptions(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.on('connect', () => socket.write('OPTIONS icap://127.0.0.1/avscan ICAP/1.0\r\n\r\n'));
    socket.on('data', (data: Buffer) => {
      socket.destroy();
      resolve(data.toString('latin1').startsWith('ICAP/1.0 200'));
    });
    socket.on('error', () => resolve(false));
  });
}

async function startCIcap(
  dir: string,
  clamdSocket: string,
): Promise<{ child: ChildProcess; port: number }> {
  const port = await freePort();
  const config = `PidFile ${dir}/c-icap.pid
CommandsSocket ${dir}/c-icap.ctl
Timeout 300
MaxKeepAliveRequests 0
KeepAliveTimeout 600
StartServers 3
MaxServers 10
MinSpareThreads 10
MaxSpareThreads 20
ThreadsPerChild 10
MaxRequestsPerChild 0
Port 127.0.0.1:${port}
ServerName assay-bench
TmpDir ${dir}
MaxMemObject 131072
DebugLevel 0
Pipelining on
ModulesDir /usr/lib/x86_64-linux-gnu/c_icap
ServicesDir /usr/lib/x86_64-linux-gnu/c_icap
TemplateDir /usr/share/c_icap/templates/
TemplateDefaultLanguage en
LoadMagicFile /etc/c-icap/c-icap.magic
ServerLog ${dir}/server.log
AccessLog /dev/null
Module common clamd_mod.so
clamd_mod.ClamdSocket ${clamdSocket}
Service antivirus_module virus_scan.so
ServiceAlias avscan virus_scan?allow204=on&sizelimit=off&mode=simple
virus_scan.ScanFileTypes TEXT DATA EXECUTABLE ARCHIVE GIF JPEG MSOFFICE
virus_scan.MaxObjectSize 200M
virus_scan.DefaultEngine clamd
`;
  writeFileSync(join(dir, 'c-icap.conf'), config);
  const child = spawn('c-icap', ['-N', '-D', '-f', join(dir, 'c-icap.conf')], { stdio: 'ignore' });
  for (let i = 0; i < 100; i++) {
    if (await answersOptions(port)) return { child, port };
    if (child.exitCode !== null) break;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`c-icap did not start: ${readFileSync(join(dir, 'server.log'), 'utf8')}`);
}

/** c-icap-stretch for `seconds` against a server: its requests per second. */
function stretch(port: number, file: string, seconds: number): Promise<number> {
  return new Promise((resolve) => {
    execFile(
      'timeout',
      [
        '-s',
        'INT',
        String(seconds),
        'c-icap-stretch',
        '-i',
        '127.0.0.1',
        '-p',
        String(port),
        '-s',
        'avscan',
        '-t',
        '16',
        '-m',
        '100000',
        file,
      ],
      { maxBuffer: 64 * MB },
      (_error, stdout, stderr) => {
        const text = `${stdout}${stderr}`;
        const served = [...text.matchAll(/Requests served :(\d+)/g)].at(-1)?.[1];
        resolve(Number(served ?? 0) / seconds);
      },
    );
  });
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'assay-bench-icap-'));
  chmodSync(dir, 0o777);
  const { clamd, socket, pid: clamdPid } = await startBenchClamd(dir);
  const icapPort = await freePort();
  const assay = await startAssay(socket, join(dir, 'assay'), {
    ASSAY_ICAP_PORT: String(icapPort),
    ASSAY_ICAP_SERVICES: 'avscan=bench',
    ASSAY_VERDICT_CACHE: 'off',
    ASSAY_MAX_FILE_SIZE: String(200 * MB),
  });
  const cIcap = await startCIcap(dir, socket);
  const servers: Server[] = [
    { name: 'Assay', port: icapPort, pids: () => [assay.child.pid ?? 0] },
    { name: 'c-icap', port: cIcap.port, pids: () => processTree(cIcap.child.pid ?? 0) },
  ];
  console.log(
    `clamd ${clamdPid}, Assay ${assay.child.pid}, c-icap ${servers[1]?.pids().join(' ')}`,
  );
  const lines: string[] = [];
  try {
    for (const scenario of SCENARIOS.filter((s) => wanted(s.key))) {
      console.log(
        `== ${scenario.key}: ${scenario.requests} requests, concurrency ${scenario.concurrency}`,
      );
      const results = new Map<string, Array<Awaited<ReturnType<typeof round>>>>();
      const peaks = new Map<string, number>();
      for (const server of servers) {
        for (const pid of server.pids()) resetPeakMemory(pid);
      }
      // Uncounted: Assay compiles its request path over its first requests (V8), c-icap needs
      // nothing of the kind; a proxy's service runs warm, so rounds compare warm servers.
      for (let w = 0; w < WARMUP; w++) {
        for (const server of servers) await round(server, scenario, clamdPid);
      }
      for (let r = 0; r < ROUNDS; r++) {
        // Alternating which goes first, so neither always runs on a warmer machine.
        const order = r % 2 === 0 ? servers : [...servers].reverse();
        for (const server of order) {
          const result = await round(server, scenario, clamdPid);
          results.set(server.name, [...(results.get(server.name) ?? []), result]);
          console.log(
            `  ${server.name.padEnd(7)} ${result.perSecond.toFixed(1).padStart(8)} req/s  CPU ${result.cpuMs.toFixed(2)} ms/req  clamd ${result.clamdMs.toFixed(2)} ms/req${result.failed > 0 ? `  ${result.failed} failed` : ''}`,
          );
        }
      }
      for (const server of servers) peaks.set(server.name, peakOf(server.pids()));
      const best = (name: string) => Math.max(...(results.get(name) ?? []).map((x) => x.perSecond));
      const cpu = (name: string) => median((results.get(name) ?? []).map((x) => x.cpuMs));
      const line =
        `${scenario.key.padEnd(5)} Assay ${best('Assay').toFixed(1)} req/s, c-icap ${best('c-icap').toFixed(1)} req/s: ratio ${(best('Assay') / best('c-icap')).toFixed(2)}; ` +
        `CPU/req Assay ${cpu('Assay').toFixed(2)} ms, c-icap ${cpu('c-icap').toFixed(2)} ms; ` +
        `peak RSS Assay ${peaks.get('Assay')?.toFixed(0)} MB, c-icap ${peaks.get('c-icap')?.toFixed(0)} MB (its processes together)`;
      lines.push(line);
      console.log(line);
    }
    if (wanted('stretch')) {
      const file = join(dir, 'stretch-4k.bin');
      writeFileSync(file, randomBytes(4 * KB));
      for (const server of servers) {
        const rate = await stretch(server.port, file, 10);
        const line = `stretch c-icap-stretch -t 16, 4 KB, 10 s: ${server.name} ${rate.toFixed(1)} req/s (paced by the tool's own waits)`;
        lines.push(line);
        console.log(line);
      }
    }
    console.log(`\nSummary\n${lines.join('\n')}`);
  } finally {
    assay.child.kill('SIGTERM');
    cIcap.child.kill('SIGTERM');
    await clamd.stop();
    await new Promise((resolve) => setTimeout(resolve, 500));
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
