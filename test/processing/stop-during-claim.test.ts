import '../helpers/loopback-only.js';
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { pollResult, waitUntil } from '../helpers/client.js';
import { randomContent, uploadForm } from '../helpers/content.js';
import { buildService, useSharedClamd } from '../helpers/service.js';
import { onPostgres, storeEnv } from '../helpers/test-database.js';

const clamd = useSharedClamd();

// Deliveries (pg-boss) exist on PostgreSQL only; SQLite's rounds run inside the job loop's stop.
test('a delivered job whose claim answers after stop began is put back, not left leased to a stopped process', {
  skip: !onPostgres,
}, async (t) => {
  // No engine: the job is tried, put back and delivered again each second, never finished.
  const first = await buildService(t, {
    ASSAY_CLAMD: '/nonexistent/clamd.sock',
    ASSAY_ENGINE_RETRY_MS: '1000',
  });
  const response = await fetch(`${first.url}/v2.2/files/async`, {
    method: 'POST',
    headers: { authorization: first.auth },
    body: uploadForm(randomContent(5000)),
  });
  assert.equal(response.status, 202);
  const { id } = (await response.json()) as { id: string };

  const databaseUrl = storeEnv(first.dataDir).ASSAY_DATABASE_URL;
  assert.ok(databaseUrl !== undefined);
  const database = new URL(databaseUrl).pathname.slice(1);
  const holder = new pg.Client({ connectionString: databaseUrl });
  // Another connection watches: pg_stat_activity is read once per transaction, the holder's.
  const watcher = new pg.Client({ connectionString: databaseUrl });
  await Promise.all([holder.connect(), watcher.connect()]);
  t.after(() => Promise.all([holder.end(), watcher.end()]));
  let holding = false;
  let stopped: Promise<void> | undefined;
  // The service's stop waits for the blocked claim: the hold ends however the test goes.
  try {
    // Hold the job's row while it waits, so its next delivery's claim blocks on it.
    await waitUntil('the waiting job is held', async () => {
      await holder.query('BEGIN');
      const { rows } = await holder.query<{ state: string }>(
        'SELECT state FROM jobs WHERE id = $1 FOR UPDATE',
        [id],
      );
      holding = rows[0]?.state === 'pending';
      if (holding) return true;
      await holder.query('ROLLBACK');
      return false;
    });
    await waitUntil('a claim waits for the row', async () => {
      const { rows } = await watcher.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM pg_stat_activity
            WHERE datname = $1 AND wait_event_type = 'Lock' AND query LIKE '%previous%processing%'`,
        [database],
      );
      return (rows[0]?.n ?? 0) > 0;
    });

    // Stop while the claim waits, and let it answer only after the dispatch's grace (1 s).
    stopped = first.service.stop();
    await sleep(1500);
    await holder.query('COMMIT');
    holding = false;
  } finally {
    if (holding) await holder.query('ROLLBACK');
  }
  await stopped;
  const { rows } = await holder.query<{ state: string; run_after: string }>(
    'SELECT state, run_after FROM jobs WHERE id = $1',
    [id],
  );
  assert.equal(rows[0]?.state, 'pending', 'the stopped process holds no lease on it');

  // The next start scans it at once, not after the lease (a minute).
  const second = await buildService(t, {
    ASSAY_CLAMD: clamd.socket,
    ASSAY_DATA_DIR: first.dataDir,
  });
  const result = await pollResult(second.url, first.auth, id, 10_000);
  assert.deepEqual(result.findings, []);
});
