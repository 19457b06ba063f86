import '../helpers/loopback-only.js';
import assert from 'node:assert/strict';
import { test } from 'node:test';
import pg from 'pg';
import { pollResult } from '../helpers/client.js';
import { randomContent, uploadForm } from '../helpers/content.js';
import { buildService, useSharedClamd } from '../helpers/service.js';
import { onPostgres, storeEnv } from '../helpers/test-database.js';

const clamd = useSharedClamd();

// pg-boss's messages exist on PostgreSQL only.
test("a worker that starts drops the messages a dead one left active for jobs it no longer held: the account's group is not blocked until pg-boss's monitor", {
  skip: !onPostgres,
}, async (t) => {
  const first = await buildService(t, {
    ASSAY_CLAMD: '/nonexistent/clamd.sock',
    ASSAY_ENGINE_RETRY_MS: '200',
  });
  const ids: string[] = [];
  for (let i = 0; i < 6; i++) {
    const response = await fetch(`${first.url}/v2.2/files/async`, {
      method: 'POST',
      headers: { authorization: first.auth },
      body: uploadForm(randomContent(2048)),
    });
    assert.equal(response.status, 202);
    ids.push(((await response.json()) as { id: string }).id);
  }
  await first.service.stop();

  // What a worker SIGKILLed between putting a job back and completing its message leaves: the
  // job pending with its next message waiting, and the old message active, its heartbeat fresh.
  // Four of them fill the account's group (ASSAY_ACCOUNT_JOB_CONCURRENCY: half of 8).
  const databaseUrl = storeEnv(first.dataDir).ASSAY_DATABASE_URL;
  const db = new pg.Client({ connectionString: databaseUrl });
  await db.connect();
  t.after(() => db.end());
  const stale = await db.query(
    `INSERT INTO pgboss.job (name, data, state, singleton_key, group_id, started_on,
         heartbeat_on, heartbeat_seconds, expire_seconds, policy)
       SELECT name, data, 'active', singleton_key, group_id, now(), now(), 30, 900, policy
         FROM pgboss.job
        WHERE name = 'assay.scan' AND state < 'active' AND singleton_key = ANY($1::text[])`,
    [ids.slice(0, 4)],
  );
  assert.equal(stale.rowCount, 4);
  const pending = await db.query(`SELECT count(*)::int AS n FROM jobs WHERE state = 'pending'`);
  assert.equal(pending.rows[0]?.n, 6);

  // pg-boss's monitor would free the group after their heartbeat (30 s) and its pass (60 s).
  const second = await buildService(t, {
    ASSAY_CLAMD: clamd.socket,
    ASSAY_DATA_DIR: first.dataDir,
  });
  for (const id of ids) {
    const result = await pollResult(second.url, first.auth, id, 10_000);
    assert.deepEqual(result.findings, []);
  }
});
