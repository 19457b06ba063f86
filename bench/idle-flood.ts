/**
 * Issue 17 item 4, measured: 20,000 connections that send nothing, from 100 loopback addresses
 * (127.0.1.x, 127.0.2.x), against `assay serve` with default settings; meanwhile `/health/live`
 * and a sync upload from 127.0.0.1 are timed. The flood runs in two child processes of 10,000
 * sockets each (one process could not hold 20,000 under a 20,000 descriptor limit).
 *   npm run build && node --import tsx bench/idle-flood.ts
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startOwnClamd } from './local-parts.js';
import { startAssay } from './service-process.js';

const PER_PROCESS = 10_000;
const ADDRESSES_PER_PROCESS = 50;

/** Child mode: opens PER_PROCESS idle connections, reports how many are open every 500 ms. */
function flood(port: number, subnet: number): void {
  let open = 0;
  let settled = 0;
  for (let i = 0; i < PER_PROCESS; i++) {
    const localAddress = `127.0.${subnet}.${1 + (i % ADDRESSES_PER_PROCESS)}`;
    const socket = connect({ port, host: '127.0.0.1', localAddress });
    let counted = false;
    socket.on('connect', () => {
      open += 1;
      counted = true;
      settled += 1;
    });
    socket.on('error', () => {});
    socket.on('close', () => {
      if (counted) open -= 1;
      else settled += 1;
    });
  }
  setInterval(() => process.stdout.write(`${JSON.stringify({ open, settled })}\n`), 500);
}

async function timed(what: () => Promise<Response>): Promise<string> {
  const started = performance.now();
  try {
    const response = await what();
    await response.arrayBuffer();
    return `${response.status} in ${(performance.now() - started).toFixed(0)} ms`;
  } catch (error) {
    return `failed after ${(performance.now() - started).toFixed(0)} ms: ${String(error)}`;
  }
}

async function main(): Promise<void> {
  const work = mkdtempSync(join(tmpdir(), 'assay-flood-'));
  const { clamd: managed, socket } = await startOwnClamd(work, { maxFileSize: 200 * 1024 * 1024 });
  const assay = await startAssay(socket, join(work, 'assay'), {
    ASSAY_RATE_LIMIT: '100',
    ASSAY_RATE_BURST: '200',
  });
  const port = Number(new URL(assay.url).port);
  const auth = `Basic ${Buffer.from('bench:bench-secret').toString('base64')}`;
  const state = new Map<ChildProcess, { open: number; settled: number }>();
  const children = [1, 2].map((subnet) => {
    const child = spawn(
      process.execPath,
      ['--import', 'tsx', 'bench/idle-flood.ts', 'flood', String(port), String(subnet)],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    state.set(child, { open: 0, settled: 0 });
    let buffered = '';
    child.stdout?.on('data', (data: Buffer) => {
      buffered += data.toString();
      const lines = buffered.split('\n');
      buffered = lines.pop() ?? '';
      const last = lines.at(-1);
      if (last) state.set(child, JSON.parse(last));
    });
    return child;
  });
  const totals = () => {
    let open = 0;
    let settled = 0;
    for (const s of state.values()) {
      open += s.open;
      settled += s.settled;
    }
    return { open, settled };
  };
  const serverFds = () => readdirSync(`/proc/${assay.child.pid}/fd`).length;
  const started = performance.now();
  while (totals().settled < 2 * PER_PROCESS && performance.now() - started < 60_000) {
    await new Promise((r) => setTimeout(r, 250));
  }
  console.log(
    `flood: ${totals().settled} connections attempted in ${((performance.now() - started) / 1000).toFixed(1)} s; ${totals().open} still open; assay holds ${serverFds()} descriptors`,
  );
  for (let round = 1; round <= 3; round++) {
    console.log(
      `round ${round}: /health/live ${await timed(() => fetch(`${assay.url}/health/live`))}`,
    );
    const form = new FormData();
    form.append('file', new Blob([`idle flood upload ${round} ${Math.random()}`]), 'a.txt');
    console.log(
      `round ${round}: sync upload ${await timed(() => fetch(`${assay.url}/v2.2/files`, { method: 'POST', headers: { authorization: auth }, body: form }))}`,
    );
    console.log(`  open flood connections: ${totals().open}; assay descriptors: ${serverFds()}`);
    await new Promise((r) => setTimeout(r, 5_000));
  }
  for (const child of children) child.kill();
  assay.child.kill('SIGTERM');
  await new Promise((resolve) => assay.child.once('exit', resolve));
  await managed.stop();
  rmSync(work, { recursive: true, force: true });
}

if (process.argv[2] === 'flood') flood(Number(process.argv[3]), Number(process.argv[4]));
else await main();
