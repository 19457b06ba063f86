/**
 * The real service inside a private network namespace (see test/outbound/dns-stall.test.ts) whose
 * resolver never answers: one account submits `UNRESOLVABLE` fetches of names no one resolves,
 * then another fetches a name from /etc/hosts (the v2.2 synchronous `location` form) with a
 * callback to that name. Prints one JSON line with the times. clamd is the parent's, over its
 * unix socket (ASSAY_CLAMD); the namespace, not the loopback-only guard, keeps packets in.
 */
import dgram from 'node:dgram';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { pino } from 'pino';
import { AccountService } from '../../src/accounts/account-service.js';
import { loadConfig } from '../../src/config.js';
import { startService } from '../../src/service.js';
// SQLite: the private network namespace this runs in has no PostgreSQL.
import { openSqliteStore } from '../../src/store/dialects/sqlite.js';

const UNRESOLVABLE = Number(process.env.UNRESOLVABLE ?? '40');

const silent = dgram.createSocket('udp4');
let queries = 0;
silent.on('message', () => {
  queries += 1; // read, never answered
});
await new Promise<void>((resolve) => silent.bind(53, '127.0.0.53', resolve));

let hookAt = 0;
const content = createServer((request, response) => {
  if (request.url === '/hook') hookAt = performance.now();
  response.end('nothing to see here');
});
await new Promise<void>((resolve) => content.listen(0, '127.0.0.1', resolve));
const { port } = content.address() as AddressInfo;

const dataDir = mkdtempSync(join(tmpdir(), 'assay-dns-stall-'));
const store = await openSqliteStore(dataDir);
const accounts = new AccountService(store);
async function key(): Promise<string> {
  const account = await accounts.createAccount({ name: 'dns stall' });
  const { key: created, secret } = await accounts.createKey(account.id);
  return `Basic ${Buffer.from(`${created.id}:${secret}`).toString('base64')}`;
}
const attacker = await key();
const victim = await key();
const config = loadConfig({
  ASSAY_PORT: '0',
  ASSAY_DATA_DIR: dataDir,
  ASSAY_CLAMD: process.env.ASSAY_CLAMD ?? '',
  ASSAY_FETCH_ALLOW: '127.0.0.1/32',
  // Every unresolvable fetch runs (and looks its name up) at once.
  ASSAY_JOB_CONCURRENCY: String(UNRESOLVABLE + 8),
  ASSAY_ACCOUNT_JOB_CONCURRENCY: String(UNRESOLVABLE),
});
const service = await startService(config, pino({ level: 'silent' }));

for (let i = 0; i < UNRESOLVABLE; i++) {
  const answer = await fetch(`${service.url}/v2.2/files/fetch`, {
    method: 'POST',
    headers: { authorization: attacker, 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ location: `http://unresolvable-${i}.example/` }).toString(),
  });
  if (answer.status !== 202) throw new Error(`fetch submission answered ${answer.status}`);
}
// Let the jobs start their lookups.
for (let waited = 0; queries < UNRESOLVABLE && waited < 5_000; waited += 50) await sleep(50);

const form = new FormData();
form.append('location', `http://hosted.test:${port}/clean.txt`);
form.append('callback', `http://hosted.test:${port}/hook`);
const started = performance.now();
const answer = await fetch(`${service.url}/v2.2/files`, {
  method: 'POST',
  headers: { authorization: victim },
  body: form,
  signal: AbortSignal.timeout(Number(process.env.HOSTED_TIMEOUT_MS ?? '60000')),
}).then(
  async (response) => ({ status: response.status, body: await response.text() }),
  (error: Error) => ({ status: 0, body: error.message }),
);
const fetchMs = Math.round(performance.now() - started);
for (let waited = 0; hookAt === 0 && waited < 10_000; waited += 20) await sleep(20);
const callbackMs = hookAt === 0 ? null : Math.round(hookAt - started);
process.stdout.write(`${JSON.stringify({ fetchMs, callbackMs, queries, answer })}\n`);
await Promise.race([service.stop(), sleep(3_000)]);
await store.close();
rmSync(dataDir, { recursive: true, force: true });
process.exit(0);
