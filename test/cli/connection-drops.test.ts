import '../helpers/loopback-only.js';
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { describe, type TestContext, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { asyncUploadLoad, deliveriesOf } from '../helpers/async-load.js';
import { startServe } from '../helpers/cli.js';
import { pollResult, waitUntil } from '../helpers/client.js';
import { startLocalServer } from '../helpers/local-server.js';
import { basic, tempDir, useSharedClamd } from '../helpers/service.js';
import { freshPostgresDatabase, onPostgres } from '../helpers/test-database.js';

const clamd = useSharedClamd();
const AUTH = basic('key', 'secret');
// Trust auth never asks for it, but it is in every process's settings: no log line may carry it.
const PASSWORD = 'pw-that-must-never-be-logged';

function dir(t: TestContext): string {
  const path = tempDir();
  t.after(() => rmSync(path, { recursive: true, force: true }));
  return path;
}

/**
 * Ends backends of `database` that are inside a transaction (between its statements, or running
 * one of several), as `pg_terminate_backend` or a failing server would: the drop the audit found
 * fatal. Returns the application of each backend it ended.
 */
async function terminateInTransaction(admin: pg.Client, database: string): Promise<string | null> {
  const { rows } = await admin.query<{ pid: number; application_name: string }>(
    `SELECT pid, application_name FROM pg_stat_activity
      WHERE datname = $1 AND pid <> pg_backend_pid() AND backend_type = 'client backend'
        AND (state = 'idle in transaction' OR (state = 'active' AND xact_start < query_start))
      ORDER BY application_name = 'assay-store' DESC
      LIMIT 1`,
    [database],
  );
  const row = rows[0];
  if (row === undefined) return null;
  await admin.query('SELECT pg_terminate_backend($1)', [row.pid]);
  return row.application_name;
}

describe('connections dropped under load', {
  skip: onPostgres ? false : 'PostgreSQL connections only (npm run test:postgres)',
}, () => {
  test('api and worker processes stay up, every accepted item is finished once, and no log carries the password', async (t) => {
    const url = new URL(await freshPostgresDatabase());
    const database = url.pathname.slice(1);
    url.password = PASSWORD;
    const receiver = await startLocalServer((_request, response) => response.end());
    t.after(() => receiver.close());
    const env = {
      ASSAY_BOOTSTRAP_CREDENTIALS: 'key:secret',
      ASSAY_CLAMD: clamd.socket,
      ASSAY_DATABASE_URL: url.href,
      ASSAY_SPOOL_DIR: dir(t),
      ASSAY_FETCH_ALLOW: '127.0.0.1/32',
      ASSAY_CALLBACK_RETRY_BASE_MS: '100',
      ASSAY_ENGINE_RETRY_MS: '200',
      ASSAY_LOG_LEVEL: 'debug',
    };
    const api = await startServe(t, { ...env, ASSAY_DATA_DIR: dir(t), ASSAY_ROLE: 'api' });
    const worker = await startServe(t, { ...env, ASSAY_DATA_DIR: dir(t), ASSAY_ROLE: 'worker' });
    const admin = new pg.Client(`${url.protocol}//postgres@${url.host}/postgres`);
    await admin.connect();
    t.after(() => admin.end());

    // Ten drops inside transactions, at least 200 ms apart, while 4 clients upload.
    const ended: string[] = [];
    // The store's transactions are the ones the audit found fatal: at least half of the drops.
    const enough = () =>
      ended.length >= 10 && ended.filter((name) => name === 'assay-store').length >= 5;
    const load = asyncUploadLoad({
      urls: () => [api.url],
      auth: AUTH,
      callback: `${receiver.url}/hook`,
      concurrency: 4,
      rate: 20,
      until: () => enough(),
    });
    const deadline = Date.now() + 90_000;
    while (!enough() && Date.now() < deadline) {
      const application = await terminateInTransaction(admin, database);
      if (application === null) {
        await sleep(2);
        continue;
      }
      ended.push(application);
      await sleep(200);
    }
    const report = await load;
    t.diagnostic(
      `ended in a transaction: ${ended.join(', ')}; accepted ${report.accepted.length}, refused ${report.refused}`,
    );
    assert.ok(
      enough(),
      "ten connections or more were dropped inside transactions, half of them the store's",
    );
    assert.deepEqual(report.unexpected, [], 'every answer was a 202 or a 503/507 with Retry-After');
    assert.equal(api.child.exitCode, null, 'the api process is alive');
    assert.equal(worker.child.exitCode, null, 'the worker process is alive');

    for (const item of report.accepted) {
      const result = await pollResult(api.url, AUTH, item.id, 60_000);
      assert.deepEqual(
        result.findings,
        item.infected ? ['content.malicious.eicar-test-signature'] : [],
        `item ${item.id}`,
      );
    }
    await waitUntil(
      'a callback for every item',
      () => deliveriesOf(receiver).size >= report.accepted.length,
      60_000,
    );
    await sleep(1000); // a second result would bring a second delivery id by now
    const deliveries = deliveriesOf(receiver);
    for (const item of report.accepted) {
      assert.equal(deliveries.get(item.id)?.size, 1, `one result, one delivery id: ${item.id}`);
    }
    assert.equal(deliveries.size, report.accepted.length, 'no callback for an item not accepted');
    assert.equal((await fetch(`${worker.url}/health/ready`)).status, 200);
    assert.equal((await fetch(`${api.url}/health/ready`)).status, 200);

    const lines = [...api.records, ...worker.records].map((record) => JSON.stringify(record));
    assert.ok(
      // The worker's per-item writes are single statements now, so most drops inside a
      // transaction are the api's acceptances: a 503 logged as the database out of reach, or a
      // group of them tried again one by one (then nothing is refused). Any line that carries
      // the drop itself (PostgreSQL's 57P01, or the client's lost connection) says it as well.
      lines.some((line) =>
        /connection lost|pg-boss error|store failed|claim|cannot reach its database|group commit failed|group of acceptances failed|57P01|terminating connection due to administrator command|Connection terminated/.test(
          line,
        ),
      ),
      'the drops were logged',
    );
    assert.deepEqual(
      lines.filter((line) => line.includes(PASSWORD)),
      [],
      'no log line carries the database password',
    );
  });
});
