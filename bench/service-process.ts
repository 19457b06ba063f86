/** Assay as its own process (the built `bin/assay.js`), for the benchmarks and the hostile run. */
import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { pino } from 'pino';
import { findClamdBinary, ManagedClamd } from '../src/engines/clamav/managed-clamd.js';

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() =>
        typeof address === 'object' && address ? resolve(address.port) : reject(),
      );
    });
  });
}

/** Current and peak resident memory of a process, from /proc. */
export function memoryOf(pid: number): { rssMb: number; peakMb: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (field: string) => Number(new RegExp(`${field}:\\s+(\\d+)`).exec(status)?.[1] ?? 0);
  return { rssMb: kb('VmRSS') / 1024, peakMb: kb('VmHWM') / 1024 };
}

/**
 * Starts a process's peak RSS (VmHWM) over from its current RSS, so that each scenario reports its
 * own peak (Linux's clear_refs, by the process's owner); returns the peak until now, in MB.
 */
export function resetPeakMemory(pid: number): number {
  const { peakMb } = memoryOf(pid);
  writeFileSync(`/proc/${pid}/clear_refs`, '5');
  return peakMb;
}

/** CPU seconds (user + system) a process has used so far, from /proc. */
export function cpuSeconds(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? [];
  return (Number(fields[11]) + Number(fields[12])) / 100; // utime, stime in clock ticks (100/s)
}

/**
 * Starts `assay serve` on a free port against an external clamd (`socket`), with the key
 * `bench:bench-secret`, and waits until it is ready. `env` adds or overrides settings; `wrapper`
 * prefixes the command (a command that execs it, as nsenter does: the child stays the service).
 */
export async function startAssay(
  socket: string,
  dataDir: string,
  env: Record<string, string> = {},
  wrapper: readonly string[] = [],
): Promise<{ url: string; child: ChildProcess }> {
  // A process started again takes its port back (ASSAY_PORT in `env`).
  const port = env.ASSAY_PORT === undefined ? await freePort() : Number(env.ASSAY_PORT);
  // BENCH_ASSAY_NODE_ARGS="--cpu-prof" profiles the service under the benchmark's load.
  const nodeArgs = (process.env.BENCH_ASSAY_NODE_ARGS ?? '').split(' ').filter(Boolean);
  // BENCH_ASSAY_ROOT: another built checkout's service instead of this one's (bench/baseline.ts).
  const root = process.env.BENCH_ASSAY_ROOT ?? process.cwd();
  const command = [...wrapper, process.execPath, ...nodeArgs, join(root, 'bin/assay.js'), 'serve'];
  const child = spawn(command[0] as string, command.slice(1), {
    cwd: root,
    env: {
      ...process.env,
      ASSAY_PORT: String(port),
      ASSAY_DATA_DIR: dataDir,
      ASSAY_CLAMD: socket,
      // The bench's clamd is written like the managed one (limits above the upload limit,
      // AlertExceedsMax): items reach it as files, as they reach the managed clamd by default.
      ASSAY_CLAMD_HANDOFF: 'file',
      ASSAY_BOOTSTRAP_CREDENTIALS: 'bench:bench-secret',
      ASSAY_LOG_LEVEL: process.env.BENCH_LOG_LEVEL ?? 'warn',
      // The async scenario's callback receiver listens on this machine.
      ASSAY_FETCH_ALLOW: '127.0.0.1/32',
      // The limiter runs (its cost is measured) but never refuses the benchmark's own load.
      ASSAY_RATE_LIMIT: '1000000',
      ASSAY_RATE_BURST: '1000000',
      ...env,
    },
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 200; i++) {
    if (child.exitCode !== null) throw new Error(`assay exited with ${child.exitCode}`);
    try {
      if ((await fetch(`${url}/health/ready`)).ok) return { url, child };
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error('assay did not become ready');
}

/**
 * A managed clamd of the benchmark's own in `dir` (Assay's signatures only, no official database:
 * fresh content scans the same everywhere), on a unix socket; stop it when done.
 */
export async function startBenchClamd(
  dir: string,
  { imageFuzzyHash = true }: { imageFuzzyHash?: boolean } = {},
): Promise<{ clamd: ManagedClamd; socket: string; pid: number }> {
  const clamdPath = findClamdBinary();
  if (clamdPath === null) throw new Error('clamd is not installed (./setup.sh)');
  const clamd = new ManagedClamd({
    dataDir: join(dir, 'clamd-home'),
    clamdPath,
    maxFileSize: 200 * 1024 * 1024,
    systemDatabaseDir: join(dir, 'no-official-databases'),
    signatureCheckMs: 3_600_000,
    imageFuzzyHash,
    logger: pino({ level: 'warn' }),
  });
  await clamd.start();
  const address = clamd.address;
  if (address.kind !== 'unix') throw new Error('the managed clamd listens on a unix socket');
  return { clamd, socket: address.path, pid: clamd.pid ?? 0 };
}
