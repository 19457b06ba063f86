import '../helpers/loopback-only.js';
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { describe, type TestContext, test } from 'node:test';
import pg from 'pg';
import { startServe } from '../helpers/cli.js';
import { pollResult, submitFetch, waitUntil } from '../helpers/client.js';
import { randomContent, uploadForm } from '../helpers/content.js';
import { startLocalServer } from '../helpers/local-server.js';
import { basic, tempDir, useSharedClamd } from '../helpers/service.js';
import { freshPostgresDatabase, onPostgres } from '../helpers/test-database.js';

const clamd = useSharedClamd();
const AUTH = basic('key', 'secret');

interface Message {
  name: string;
  singleton_key: string;
  group_id: string;
  state: string;
}

/** pg-boss's messages of Assay's queues (callbacks only), as the database holds them. */
async function messages(url: string): Promise<Message[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const { rows } = await client.query<Message>(
      `SELECT name, singleton_key, group_id, state::text AS state FROM pgboss.job
        WHERE name LIKE 'assay.%' ORDER BY created_on`,
    );
    return rows;
  } finally {
    await client.end();
  }
}

/** The jobs of the store's due list: their id, stage and state. */
async function jobs(url: string): Promise<Array<{ id: string; stage: string; state: string }>> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const { rows } = await client.query<{ id: string; stage: string; state: string }>(
      'SELECT id, stage, state FROM jobs ORDER BY creation_date',
    );
    return rows;
  } finally {
    await client.end();
  }
}

function dataDir(t: TestContext): string {
  const dir = tempDir();
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** The settings every process of one deployment shares: the database, clamd, one spool. */
function deploymentEnv(t: TestContext, database: string): Record<string, string> {
  return {
    ASSAY_BOOTSTRAP_CREDENTIALS: 'key:secret',
    ASSAY_CLAMD: clamd.socket,
    ASSAY_FETCH_ALLOW: '127.0.0.1/32',
    ASSAY_DATABASE_URL: database,
    // Every process reads and writes the spool: one directory for all of them.
    ASSAY_SPOOL_DIR: dataDir(t),
  };
}

describe('jobs from the due list, callbacks through pg-boss, on PostgreSQL', {
  skip: onPostgres ? false : 'runs in the PostgreSQL pass (npm run test:postgres)',
}, () => {
  test('accepted work waits in the due list until a worker takes it, woken by its signal; callbacks are pg-boss messages', async (t) => {
    const receiver = await startLocalServer((_request, response) => response.end('ok'));
    t.after(() => receiver.close());
    const remote = await startLocalServer((_request, response) => response.end('fetched text'));
    t.after(() => remote.close());
    const database = await freshPostgresDatabase();
    const env = deploymentEnv(t, database);
    const api = await startServe(t, { ...env, ASSAY_DATA_DIR: dataDir(t), ASSAY_ROLE: 'api' });

    const submit = async (form: FormData) => {
      const response = await fetch(`${api.url}/v2.2/files/async`, {
        method: 'POST',
        headers: { authorization: AUTH },
        body: form,
      });
      assert.equal(response.status, 202);
      return ((await response.json()) as { id: string }).id;
    };
    const upload = await submit(uploadForm(randomContent(3000)));
    const withCallback = await submit(
      uploadForm(randomContent(3000), { callback: `${receiver.url}/hook` }),
    );
    const fetched = await submitFetch(api.url, AUTH, `${remote.url}/file.txt`);

    // Nothing runs the work yet: each job waits in the store, in its first stage; no message.
    assert.deepEqual(
      (await jobs(database)).map((job) => [job.id, job.stage, job.state]),
      [
        [upload, 'scan', 'pending'],
        [withCallback, 'scan', 'pending'],
        [fetched, 'download', 'pending'],
      ],
    );
    assert.deepEqual(await messages(database), []);

    await startServe(t, { ...env, ASSAY_DATA_DIR: dataDir(t), ASSAY_ROLE: 'worker' });
    for (const id of [upload, withCallback, fetched]) {
      const result = await pollResult(api.url, AUTH, id, 30_000);
      assert.deepEqual(result.findings, [], `${id} scanned by the worker`);
    }
    await waitUntil('the callback was delivered', () => receiver.requests.length === 1, 10_000);
    // The callback went through pg-boss: one message, completed.
    await waitUntil(
      'the callback message completed',
      async () => (await messages(database)).every((m) => m.state === 'completed'),
      10_000,
    );
    assert.deepEqual(
      (await messages(database)).map((m) => m.name),
      ['assay.callback'],
    );
    assert.deepEqual(await jobs(database), [], 'every job finished');

    // The worker is idle now: only the signal of the api's commit wakes it (its poll is 30 s).
    const started = Date.now();
    const later = await submit(uploadForm(randomContent(3000)));
    const result = await pollResult(api.url, AUTH, later, 5_000);
    assert.deepEqual(result.findings, []);
    t.diagnostic(`an upload to an idle worker: result after ${Date.now() - started} ms`);
  });

  test("an account's cap holds across two workers", async (t) => {
    // Each download is held 400 ms: how many run at once is what the remote sees.
    let running = 0;
    let most = 0;
    const remote = await startLocalServer(async (_request, response) => {
      running += 1;
      most = Math.max(most, running);
      await new Promise((resolve) => setTimeout(resolve, 400));
      running -= 1;
      response.end(randomContent(512));
    });
    t.after(() => remote.close());
    const env = {
      ...deploymentEnv(t, await freshPostgresDatabase()),
      ASSAY_FETCH_CONCURRENCY: '4',
      ASSAY_ACCOUNT_FETCH_CONCURRENCY: '2',
    };
    const api = await startServe(t, { ...env, ASSAY_DATA_DIR: dataDir(t), ASSAY_ROLE: 'api' });
    await startServe(t, { ...env, ASSAY_DATA_DIR: dataDir(t), ASSAY_ROLE: 'worker' });
    await startServe(t, { ...env, ASSAY_DATA_DIR: dataDir(t), ASSAY_ROLE: 'worker' });
    // Ten fetches of one account, submitted at once: each worker has 4 download slots.
    const ids = await Promise.all(
      Array.from({ length: 10 }, (_, i) => submitFetch(api.url, AUTH, `${remote.url}/${i}`)),
    );
    for (const id of ids) {
      const result = await pollResult(api.url, AUTH, id, 30_000);
      assert.deepEqual(result.findings, [], id);
    }
    assert.equal(most, 2, `downloads of one account at once, over both workers: ${most}`);
  });

  test("a process keeps to its pools: the store's, pg-boss's and one LISTEN connection", async (t) => {
    const receiver = await startLocalServer((_request, response) => response.end('ok'));
    t.after(() => receiver.close());
    const database = await freshPostgresDatabase();
    const serve = await startServe(t, {
      ...deploymentEnv(t, database),
      ASSAY_DATA_DIR: dataDir(t),
      ASSAY_DATABASE_POOL_SIZE: '2',
      ASSAY_DISPATCH_POOL_SIZE: '1',
    });
    // The connections on the deployment's database, by pool, every 20 ms (from another database).
    const server = new URL(database);
    const name = server.pathname.slice(1);
    server.pathname = '/postgres';
    const observer = new pg.Client({ connectionString: server.href });
    await observer.connect();
    t.after(() => observer.end());
    const most = new Map<string, number>();
    let observing = true;
    const observed = (async () => {
      while (observing) {
        const { rows } = await observer.query<{ application_name: string; n: number }>(
          `SELECT application_name, count(*)::int AS n FROM pg_stat_activity
            WHERE datname = $1 GROUP BY 1`,
          [name],
        );
        for (const row of rows) {
          most.set(row.application_name, Math.max(most.get(row.application_name) ?? 0, row.n));
        }
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    })();
    // Work for both pools at once: async uploads, each with a callback, and sync uploads.
    const ids = await Promise.all(
      Array.from({ length: 30 }, async () => {
        const response = await fetch(`${serve.url}/v2.2/files/async`, {
          method: 'POST',
          headers: { authorization: AUTH },
          body: uploadForm(randomContent(2000), { callback: `${receiver.url}/hook` }),
        });
        assert.equal(response.status, 202);
        return ((await response.json()) as { id: string }).id;
      }),
    );
    // Fewer at once than an account's synchronous scans (ASSAY_ACCOUNT_SYNC_CONCURRENCY, 8).
    const synced = await Promise.all(
      Array.from({ length: 6 }, async () => {
        const response = await fetch(`${serve.url}/v2.2/files`, {
          method: 'POST',
          headers: { authorization: AUTH },
          body: uploadForm(randomContent(2000)),
        });
        await response.arrayBuffer();
        return response.status;
      }),
    );
    assert.deepEqual(new Set(synced), new Set([201]));
    await waitUntil(
      'every callback delivered',
      () => receiver.requests.length === ids.length,
      60_000,
    );
    observing = false;
    await observed;
    const store = most.get('assay-store') ?? 0;
    const dispatch = most.get('assay-dispatch') ?? 0;
    assert.ok(store >= 1 && store <= 2, `the store's connections at most: ${store}`);
    // pg-boss's pool of one, and its LISTEN connection (which the jobs' signals need).
    assert.ok(dispatch >= 1 && dispatch <= 2, `pg-boss's connections at most: ${dispatch}`);
    t.diagnostic(`connections at most: store ${store}, pg-boss ${dispatch}`);
  });
});
