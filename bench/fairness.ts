/**
 * `npm run bench:fairness`: the loads of issue 18's audit against `assay serve` (default
 * settings, a fresh data dir each), and how long another account waits meanwhile. Not a test: it
 * prints, per load, account B's 20-byte async upload from submission to a readable result, and
 * the delay between a result being readable and its callback arriving.
 *
 * - 8 fetches (account A) of a URL that never answers;
 * - 16 fetches (A) of a URL that trickles a byte every 500 ms;
 * - both at once, from two accounts (A: never, C: trickle);
 * - 48 callbacks (A) to a receiver's paths that never answer; then A's callback to another
 *   receiver, A's callback to an answering path of the hanging receiver, and B's callbacks to
 *   either;
 * - 48 callbacks (A) to a receiver that never answers on four ports; then B's callback.
 *
 * `assay serve` is the built `bin/assay.js` of the working directory, so the same script measures
 * another checkout: `cd <checkout> && npm run build && node --import tsx <this file>`.
 */

import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startOwnClamd } from './local-parts.js';
import { startAssay } from './service-process.js';

/** A load's measurements give up after this long ("> 120 s"). */
const PATIENCE_MS = 120_000;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

interface Receiver {
  url: string;
  /** When the first request for a path starting with `prefix` arrived (ms since epoch). */
  arrival(prefix: string): number | undefined;
  /** Requests received so far. */
  count(): number;
  close(): void;
}

/** A local HTTP server: /never and /hang never answer, /slow trickles, anything else is 200. */
async function startReceiver(): Promise<Receiver> {
  const arrivals: Array<{ url: string; at: number }> = [];
  const open = new Set<ServerResponse>();
  const server: Server = createServer((request, response) => {
    request.resume();
    request.on('end', () => {
      const url = request.url ?? '';
      arrivals.push({ url, at: Date.now() });
      if (url.startsWith('/never') || url.startsWith('/hang')) {
        open.add(response);
        return;
      }
      if (url.startsWith('/slow')) {
        open.add(response);
        response.writeHead(200, { 'content-length': String(1024 * 1024) });
        const timer = setInterval(() => response.write('x'), 500);
        response.on('close', () => clearInterval(timer));
        return;
      }
      response.end(randomBytes(1024));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    arrival: (prefix) => arrivals.find((a) => a.url.startsWith(prefix))?.at,
    count: () => arrivals.length,
    close() {
      server.closeAllConnections();
      server.close();
    },
  };
}

function adminJson(dataDir: string, args: string[]): Record<string, string> {
  const out = execFileSync(process.execPath, ['bin/assay.js', 'admin', ...args, '--json'], {
    env: { ...process.env, ASSAY_DATA_DIR: dataDir, ASSAY_LOG_LEVEL: 'silent' },
  });
  return JSON.parse(out.toString()) as Record<string, string>;
}

/** A new account with one key; its `Authorization` header. */
function newAccount(dataDir: string, name: string): string {
  const account = adminJson(dataDir, ['account', 'create', '--name', name]);
  const key = adminJson(dataDir, ['key', 'create', '--account', account.id ?? '']);
  return `Basic ${Buffer.from(`${key.key}:${key.secret}`).toString('base64')}`;
}

async function submitFetch(url: string, auth: string, location: string): Promise<void> {
  const response = await fetch(`${url}/v2.2/files/fetch`, {
    method: 'POST',
    headers: { authorization: auth, 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ location }).toString(),
  });
  if (response.status !== 202) throw new Error(`fetch submission answered ${response.status}`);
}

async function uploadAsync(url: string, auth: string, callback?: string): Promise<string> {
  const form = new FormData();
  form.append('file', new Blob([randomBytes(20)]), 'f.bin');
  if (callback !== undefined) form.append('callback', callback);
  const response = await fetch(`${url}/v2.2/files/async`, {
    method: 'POST',
    headers: { authorization: auth },
    body: form,
  });
  if (response.status !== 202) throw new Error(`async upload answered ${response.status}`);
  return ((await response.json()) as { id: string }).id;
}

/** When the result became readable (ms since epoch), or null past PATIENCE_MS. */
async function resultReady(url: string, auth: string, id: string): Promise<number | null> {
  const deadline = Date.now() + PATIENCE_MS;
  while (Date.now() < deadline) {
    const response = await fetch(`${url}/v2.2/files/${id}`, { headers: { authorization: auth } });
    await response.arrayBuffer();
    if (response.status === 200) return Date.now();
    await sleep(20);
  }
  return null;
}

const seconds = (ms: number | null) =>
  ms === null ? `> ${PATIENCE_MS / 1000} s` : `${(ms / 1000).toFixed(2)} s`;

/** B's upload: submission to readable result. */
async function timeToResult(url: string, auth: string): Promise<string> {
  const started = Date.now();
  const ready = await resultReady(url, auth, await uploadAsync(url, auth));
  return seconds(ready === null ? null : ready - started);
}

/** An upload with a callback to `receiver` at `path`: result readable to callback arrival. */
async function callbackDelay(
  url: string,
  auth: string,
  receiver: Receiver,
  path: string,
): Promise<string> {
  const ready = await resultReady(url, auth, await uploadAsync(url, auth, receiver.url + path));
  if (ready === null) return 'no result';
  const deadline = ready + PATIENCE_MS;
  while (receiver.arrival(path) === undefined && Date.now() < deadline) await sleep(20);
  const arrived = receiver.arrival(path);
  return arrived === undefined ? seconds(null) : seconds(Math.max(0, arrived - ready));
}

async function waitFor(condition: () => boolean): Promise<void> {
  const deadline = Date.now() + 30_000;
  while (!condition() && Date.now() < deadline) await sleep(20);
  await sleep(500);
}

type Load = (
  url: string,
  accounts: (name: string) => string,
  report: (line: string) => void,
) => Promise<void>;

const loads: Array<[string, Load]> = [
  [
    "8 fetches (A) of a URL that never answers; B's upload",
    async (url, account, report) => {
      const remote = await startReceiver();
      const a = account('A');
      for (let i = 0; i < 8; i++) await submitFetch(url, a, `${remote.url}/never/${i}`);
      await waitFor(() => remote.count() >= 4);
      report(`B's result: ${await timeToResult(url, account('B'))}`);
      remote.close();
    },
  ],
  [
    "16 fetches (A) of a URL that trickles; B's upload",
    async (url, account, report) => {
      const remote = await startReceiver();
      const a = account('A');
      for (let i = 0; i < 16; i++) await submitFetch(url, a, `${remote.url}/slow/${i}`);
      await waitFor(() => remote.count() >= 4);
      report(`B's result: ${await timeToResult(url, account('B'))}`);
      remote.close();
    },
  ],
  [
    "8 never-answering fetches (A) and 16 trickling ones (C); B's upload",
    async (url, account, report) => {
      const remote = await startReceiver();
      const a = account('A');
      const c = account('C');
      for (let i = 0; i < 8; i++) await submitFetch(url, a, `${remote.url}/never/${i}`);
      for (let i = 0; i < 16; i++) await submitFetch(url, c, `${remote.url}/slow/${i}`);
      await waitFor(() => remote.count() >= 8);
      report(`B's result: ${await timeToResult(url, account('B'))}`);
      remote.close();
    },
  ],
  [
    '48 callbacks (A) to paths of a receiver that never answer',
    async (url, account, report) => {
      const hanging = await startReceiver();
      const fast = await startReceiver();
      const a = account('A');
      for (let i = 0; i < 48; i++) await uploadAsync(url, a, `${hanging.url}/hang/${i}`);
      await waitFor(() => hanging.count() >= 4);
      const b = account('B');
      const [aFast, aSame, bFast, bSame] = await Promise.all([
        callbackDelay(url, a, fast, '/a'),
        callbackDelay(url, a, hanging, '/a'),
        callbackDelay(url, b, fast, '/b'),
        callbackDelay(url, b, hanging, '/b'),
      ]);
      report(`A's callback to another receiver:                  ${aFast}`);
      report(`A's callback to an answering path of the same one: ${aSame}`);
      report(`B's callback to another receiver:                  ${bFast}`);
      report(`B's callback to an answering path of the same one: ${bSame}`);
      hanging.close();
      fast.close();
    },
  ],
  [
    '48 callbacks (A) to a receiver that never answers, on 4 ports',
    async (url, account, report) => {
      const hanging = await Promise.all([1, 2, 3, 4].map(() => startReceiver()));
      const fast = await startReceiver();
      const a = account('A');
      for (let i = 0; i < 48; i++) {
        await uploadAsync(url, a, `${hanging[i % 4]?.url}/hang/${i}`);
      }
      await waitFor(() => hanging.reduce((sum, r) => sum + r.count(), 0) >= 8);
      report(`B's callback: ${await callbackDelay(url, account('B'), fast, '/b')}`);
      for (const receiver of [...hanging, fast]) receiver.close();
    },
  ],
];

async function main(): Promise<void> {
  const work = mkdtempSync(join(tmpdir(), 'assay-fairness-'));
  const { clamd: managed, socket } = await startOwnClamd(work, { maxFileSize: 200 * 1024 * 1024 });
  const only = process.env.FAIRNESS_ONLY?.split(',').map(Number);
  try {
    for (const [index, [name, load]] of loads.entries()) {
      if (only !== undefined && !only.includes(index + 1)) continue;
      const dataDir = join(work, `assay-${index}`);
      const names = new Map<string, string>();
      const account = (label: string) => {
        let auth = names.get(label);
        if (auth === undefined) {
          auth = newAccount(dataDir, label);
          names.set(label, auth);
        }
        return auth;
      };
      account('A'); // the data dir exists before the service starts
      const assay = await startAssay(socket, dataDir, { ASSAY_SHUTDOWN_GRACE: '0' });
      console.log(`${index + 1}. ${name}`);
      try {
        await load(assay.url, account, (line) => console.log(`   ${line}`));
      } finally {
        assay.child.kill('SIGTERM');
        await new Promise((resolve) => assay.child.once('exit', resolve));
      }
    }
  } finally {
    await managed.stop();
    rmSync(work, { recursive: true, force: true });
  }
}

await main();
