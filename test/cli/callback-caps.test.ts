import '../helpers/loopback-only.js';
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import type { ServerResponse } from 'node:http';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { assayCliAsync, startServe } from '../helpers/cli.js';
import { pollResult, waitUntil } from '../helpers/client.js';
import { randomContent, uploadForm } from '../helpers/content.js';
import { type LocalServer, startLocalServer } from '../helpers/local-server.js';
import { basic, tempDir, useSharedClamd } from '../helpers/service.js';
import { storeEnv } from '../helpers/test-database.js';

const clamd = useSharedClamd();
const HOLD_MS = 1_500;

/** Requests held open at once: now, and the most seen. */
interface Held {
  open: Set<ServerResponse>;
  most: number;
}

function held(): Held {
  return { open: new Set(), most: 0 };
}

/**
 * A receiver that answers each callback 200 after HOLD_MS, counting how many it holds at once,
 * alone and in `account` (shared by the account's receivers): the account's callbacks in flight
 * are the responses its receivers hold, counted as they open and close.
 */
async function slowReceiver(account: Held) {
  const counts = held();
  const server: LocalServer = await startLocalServer(async (_request, response) => {
    // An attempt its sender gave up on (its time ran out on a loaded machine) is no longer in
    // flight: the sender's caps count it only until then.
    if (response.socket === null || response.socket.destroyed) return;
    const done = () => {
      counts.open.delete(response);
      account.open.delete(response);
    };
    response.on('close', done);
    for (const count of [counts, account]) {
      count.open.add(response);
      count.most = Math.max(count.most, count.open.size);
    }
    await sleep(HOLD_MS);
    // Before the answer leaves: the sender frees its place only once it has the answer.
    done();
    response.end('ok');
  });
  return { server, counts };
}

async function uploadWithCallback(url: string, auth: string, callback: string): Promise<string> {
  const response = await fetch(`${url}/v2.2/files/async`, {
    method: 'POST',
    headers: { authorization: auth },
    body: uploadForm(randomContent(64), { callback }),
  });
  assert.equal(response.status, 202, await response.clone().text());
  return ((await response.json()) as { id: string }).id;
}

// Issue 28: the per-account and per-destination callback caps hold for the deployment, not per
// process: two worker processes deliver one account's callbacks (both stores).
test('two worker processes: one account never has more callbacks in flight than its caps, in all', async (t) => {
  const dataDir = tempDir();
  t.after(() => rmSync(dataDir, { recursive: true, force: true }));
  const env = {
    ASSAY_DATA_DIR: dataDir,
    ASSAY_BOOTSTRAP_CREDENTIALS: 'key:secret',
    ASSAY_CLAMD: clamd.socket,
    ASSAY_FETCH_ALLOW: '127.0.0.1/32',
    ASSAY_CALLBACK_CONCURRENCY: '8',
    ASSAY_ACCOUNT_CALLBACK_CONCURRENCY: '3',
    ASSAY_CALLBACK_DESTINATION_CONCURRENCY: '2',
    ASSAY_SHUTDOWN_GRACE: '0',
  };
  const api = await startServe(t, env, [], ['--role', 'api']);
  const workers = await startServe(t, env, [], ['--role', 'worker', '--processes', '2']);
  const account = held();
  const receivers = [await slowReceiver(account), await slowReceiver(account)];
  const fast = await startLocalServer((_request, response) => response.end('ok'));
  t.after(() => Promise.all([...receivers.map((r) => r.server.close()), fast.close()]));
  const auth = basic('key', 'secret');

  // Account A: 6 callbacks to each of two destinations. Per process, 3 and 2 would let 6 and 4 run.
  const ids: string[] = [];
  // One destination's first: the first few due all go to it.
  for (const { server } of receivers) {
    for (let i = 0; i < 6; i++) {
      ids.push(await uploadWithCallback(api.url, auth, `${server.url}/a/${i}`));
    }
  }
  const delivered = () => receivers.reduce((sum, r) => sum + r.server.requests.length, 0);
  // Meanwhile account B's callback is not held by A's cap. The CLI runs beside this process, not
  // in its stead: a blocked process would hold the receivers' answers, and on a loaded machine the
  // workers' attempts ran out of time (15 s) and left requests the receivers counted as held.
  const cli = (args: string[]) =>
    assayCliAsync(args, { env: { ASSAY_DATA_DIR: dataDir, ...storeEnv(dataDir) } });
  const accountB = await cli(['admin', 'account', 'create', '--name', 'B', '--json']);
  assert.equal(accountB.status, 0, accountB.stderr);
  const keyB = await cli([
    'admin',
    'key',
    'create',
    '--account',
    JSON.parse(accountB.stdout).id,
    '--json',
  ]);
  assert.equal(keyB.status, 0, keyB.stderr);
  const b = JSON.parse(keyB.stdout) as { key: string; secret: string };
  await waitUntil('A’s first callbacks', () => delivered() >= 3, 20_000);
  const bId = await uploadWithCallback(api.url, basic(b.key, b.secret), `${fast.url}/b`);
  await pollResult(api.url, basic(b.key, b.secret), bId);
  await fast.waitFor(1, 5_000);

  await waitUntil('all of A’s callbacks', () => delivered() >= ids.length, 60_000);
  await sleep(500);
  const most = receivers.map((r) => r.counts.most);
  t.diagnostic(`A's callbacks at once: per destination ${most.join(', ')}; in all ${account.most}`);
  for (const count of most) assert.ok(count <= 2, `a destination held ${count} at once`);
  // The account's cap in all: both processes' deliveries counted together.
  assert.ok(account.most <= 3, `the account had ${account.most} callbacks in flight at once`);
  assert.equal(Math.max(...most), 2, 'the destinations’ cap was reached: the test tested it');
  assert.equal(account.most, 3, 'the account’s cap was reached: the test tested it');
  // Each item's callback once: one delivery id per item, none twice.
  const deliveryIds = receivers.flatMap((r) =>
    r.server.requests.map((request) => String(request.headers['x-assay-delivery'])),
  );
  assert.equal(new Set(deliveryIds).size, ids.length);
  assert.equal(deliveryIds.length, ids.length);
  // Two worker processes ran (each logs that it serves).
  const pids = new Set(
    workers.records.filter((record) => record.msg === 'process serving').map((r) => r.pid),
  );
  assert.equal(pids.size, 2, 'two worker processes');
});
