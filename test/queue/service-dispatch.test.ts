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

/** pg-boss's messages of Assay's queues, as the database holds them. */
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

function dataDir(t: TestContext): string {
  const dir = tempDir();
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

describe('dispatch through pg-boss on PostgreSQL', {
  skip: onPostgres ? false : 'runs in the PostgreSQL pass (npm run test:postgres)',
}, () => {
  test('accepted work waits as pg-boss messages until a worker takes it; callbacks go the same way', async (t) => {
    const receiver = await startLocalServer((_request, response) => response.end('ok'));
    t.after(() => receiver.close());
    const remote = await startLocalServer((_request, response) => response.end('fetched text'));
    t.after(() => remote.close());
    const database = freshPostgresDatabase();
    const env = {
      ASSAY_BOOTSTRAP_CREDENTIALS: 'key:secret',
      ASSAY_CLAMD: clamd.socket,
      ASSAY_FETCH_ALLOW: '127.0.0.1/32',
      ASSAY_DATABASE_URL: database,
      // Both processes read and write the spool: one directory for both.
      ASSAY_SPOOL_DIR: dataDir(t),
    };
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

    // Nothing runs the work yet: each job is one message waiting in the queue of its first stage,
    // keyed by the job's id, grouped by its account (the bootstrap account).
    const waiting = await messages(database);
    assert.deepEqual(
      waiting.map((m) => [m.name, m.singleton_key, m.state]),
      [
        ['assay.scan', upload, 'created'],
        ['assay.scan', withCallback, 'created'],
        ['assay.download', fetched, 'created'],
      ],
    );
    assert.equal(new Set(waiting.map((m) => m.group_id)).size, 1, 'one account, one group');

    await startServe(t, { ...env, ASSAY_DATA_DIR: dataDir(t), ASSAY_ROLE: 'worker' });
    for (const id of [upload, withCallback, fetched]) {
      const result = await pollResult(api.url, AUTH, id, 30_000);
      assert.deepEqual(result.findings, [], `${id} scanned by the worker`);
    }
    await waitUntil('the callback was delivered', () => receiver.requests.length === 1, 10_000);

    // Every message was completed: the fetch's went through both stages, and the callback had one.
    await waitUntil(
      'every message completed',
      async () => (await messages(database)).every((m) => m.state === 'completed'),
      10_000,
    );
    const done = await messages(database);
    const names = (id: string) => done.filter((m) => m.singleton_key === id).map((m) => m.name);
    assert.deepEqual(names(fetched), ['assay.download', 'assay.scan']);
    assert.deepEqual(names(upload), ['assay.scan']);
    assert.equal(done.filter((m) => m.name === 'assay.callback').length, 1);
  });
});
