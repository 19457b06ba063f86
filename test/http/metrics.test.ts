import '../helpers/loopback-only.js';
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { pino } from 'pino';
import { eicar } from '../../src/engines/test-content.js';
import { MetricsRegistry } from '../../src/metrics/registry.js';
import { startServe } from '../helpers/cli.js';
import { httpRequest, pollResult, waitUntil } from '../helpers/client.js';
import { randomContent, uploadForm } from '../helpers/content.js';
import { startLocalServer } from '../helpers/local-server.js';
import { moved, parseMetrics, type Sample, scrape, series, total } from '../helpers/metrics.js';
import { basic, buildService, tempDir, useSharedClamd } from '../helpers/service.js';
import { onPostgres, TEST_STORE } from '../helpers/test-database.js';

const clamd = useSharedClamd();

async function upload(url: string, auth: string, content: Buffer | string, fields = {}) {
  const response = await fetch(`${url}/v2.2/files`, {
    method: 'POST',
    headers: { authorization: auth },
    body: uploadForm(content, fields),
  });
  assert.equal(response.status, 201, await response.clone().text());
  return (await response.json()) as { id: string; findings: string[] };
}

describe(`GET /metrics (${TEST_STORE})`, () => {
  test('known traffic moves the counters by exactly its amounts', async (t) => {
    const receiver = await startLocalServer((_request, response) => response.end('ok'));
    t.after(() => receiver.close());
    const svc = await buildService(t, {
      ASSAY_CLAMD: clamd.socket,
      ASSAY_FETCH_ALLOW: '127.0.0.1/32',
      ASSAY_AUTH_FAIL_RATE: '0.01',
      ASSAY_AUTH_FAIL_BURST: '2',
    });
    // A second key, limited to 2 requests (the service has never read it: no cache to wait out).
    const limited = await svc.createAccountKey();
    await svc.store.apiKeys.update(limited.keyId, { rateLimit: { rate: 0.01, burst: 2 } });
    const before = await scrape(svc.url);

    const clean = randomContent(3000);
    const asyncContent = randomContent(5000);
    assert.deepEqual((await upload(svc.url, svc.auth, clean)).findings, []);
    assert.deepEqual((await upload(svc.url, svc.auth, eicar())).findings, [
      'content.malicious.eicar-test-signature',
    ]);
    // The same content again: the verdict cache answers it (on by default, per account).
    assert.deepEqual((await upload(svc.url, svc.auth, clean)).findings, []);
    const accepted = await fetch(`${svc.url}/v2.2/files/async`, {
      method: 'POST',
      headers: { authorization: svc.auth },
      body: uploadForm(asyncContent, { callback: `${receiver.url}/hook` }),
    });
    assert.equal(accepted.status, 202);
    const { id } = (await accepted.json()) as { id: string };
    assert.deepEqual((await pollResult(svc.url, svc.auth, id)).findings, []);
    await receiver.waitFor(1);
    // Wrong credentials from another address: two 401s, then its failed-authentication limit.
    const wrong = { authorization: basic(svc.keyId, 'not-the-secret') };
    for (const status of [401, 401, 429]) {
      const answer = await httpRequest(`${svc.url}/v2.2/ping`, {
        headers: wrong,
        localAddress: '127.0.0.2',
      });
      assert.equal(answer.status, status);
    }
    // A key's own rate limit: two requests, then 429.
    for (const status of [200, 200, 429]) {
      const ping = await fetch(`${svc.url}/v2.2/ping`, {
        headers: { authorization: limited.auth },
      });
      assert.equal(ping.status, status);
    }
    for (const path of ['/nowhere', '/nowhere/else/at/all']) {
      assert.equal((await fetch(`${svc.url}${path}`)).status, 404);
    }
    // The callback is counted once its delivery is recorded, just after the receiver answered.
    let after: Sample[] = [];
    await waitUntil('the callback delivery is counted', async () => {
      after = await scrape(svc.url);
      return moved(before, after, 'assay_callbacks_delivered_total') > 0;
    });

    const requests = (method: string, route: string, status: string) =>
      moved(before, after, 'assay_http_requests_total', { method, route, status });
    assert.equal(requests('POST', '/v2.2/files', '201'), 3);
    assert.equal(requests('POST', '/v2.2/files/async', '202'), 1);
    assert.equal(requests('GET', '/v2.2/ping', '401'), 2);
    assert.equal(requests('GET', '/v2.2/ping', '429'), 2);
    assert.equal(requests('GET', '/v2.2/ping', '200'), 2);
    assert.equal(requests('GET', 'unmatched', '404'), 2, 'unknown paths share one label');
    assert.equal(
      moved(before, after, 'assay_http_request_duration_seconds_count', {
        method: 'POST',
        route: '/v2.2/files',
      }),
      3,
    );
    const routes = new Set(series(after, 'assay_http_requests_total').map((s) => s.labels.route));
    assert.ok(!routes.has('/nowhere') && routes.has('/v2.2/files/:id'), [...routes].join(' '));

    assert.equal(moved(before, after, 'assay_items_total', { outcome: 'clean' }), 3);
    assert.equal(moved(before, after, 'assay_items_total', { outcome: 'flagged' }), 1);
    assert.equal(moved(before, after, 'assay_items_total', { outcome: 'error' }), 0);
    assert.equal(moved(before, after, 'assay_flagged_items_total', { category: 'malware' }), 1);
    assert.equal(moved(before, after, 'assay_flagged_items_total'), 1);
    assert.equal(
      moved(before, after, 'assay_scanned_bytes_total'),
      clean.length + eicar().length + asyncContent.length,
      'what was scanned; the reused verdict scanned nothing',
    );
    assert.equal(moved(before, after, 'assay_verdict_cache_lookups_total', { result: 'hit' }), 1);
    assert.equal(moved(before, after, 'assay_verdict_cache_lookups_total', { result: 'miss' }), 3);
    const engineAnswers = (engine: string) =>
      moved(before, after, 'assay_engine_duration_seconds_count', { engine });
    assert.equal(engineAnswers('clamav'), 3);
    assert.equal(engineAnswers('content-type'), 3);
    assert.equal(engineAnswers('nsfw-language'), 1, 'EICAR is text: the language engine read it');
    assert.equal(moved(before, after, 'assay_engine_errors_total'), 0);

    assert.equal(moved(before, after, 'assay_authentication_failures_total'), 2);
    const refused = (reason: string) =>
      moved(before, after, 'assay_requests_refused_total', { reason });
    assert.equal(refused('authentication-failure-limit'), 1);
    assert.equal(refused('key-rate-limit'), 1);
    assert.equal(moved(before, after, 'assay_callbacks_delivered_total'), 1);
    assert.equal(moved(before, after, 'assay_callbacks_failed_total'), 0);
    assert.equal(moved(before, after, 'assay_callback_attempts_failed_total'), 0);

    // Read at scrape time: nothing waits now, clamd answers, the settings are the defaults.
    assert.equal(total(after, 'assay_jobs_due'), 0);
    assert.equal(total(after, 'assay_jobs_oldest_due_seconds'), 0);
    assert.equal(total(after, 'assay_jobs_running'), 0);
    assert.equal(total(after, 'assay_callbacks_pending'), 0);
    assert.equal(total(after, 'assay_spool_bytes'), 0);
    assert.equal(total(after, 'assay_spool_quota_bytes'), 5 * 1024 ** 3);
    assert.equal(total(after, 'assay_spool_account_quota_bytes'), 1024 ** 3);
    assert.equal(total(after, 'assay_http_connections_limit'), 4096);
    assert.ok(total(after, 'assay_http_connections_open') >= 1);
    assert.equal(total(after, 'assay_processes', { role: 'all' }), 1);
    assert.equal(total(after, 'assay_clamd_up'), 1);
    const ready = (await (await fetch(`${svc.url}/health/ready`)).json()) as {
      engines: Array<Record<string, unknown>>;
    };
    const engine = ready.engines[0] ?? {};
    const [info] = series(after, 'assay_clamd_info');
    assert.deepEqual(info?.labels, {
      version: engine.version,
      signatures_version: String(engine.signatures_version ?? 'none'),
      own_signatures_version: engine.own_signatures_version,
      databases_version: engine.databases_version,
    });
    assert.equal(total(after, 'assay_scrape_errors_total'), 0);
    assert.ok(total(after, 'process_resident_memory_bytes') > 0, 'process metrics');
    assert.ok(series(after, 'nodejs_eventloop_lag_seconds').length === 1, 'event-loop lag');
    if (onPostgres) {
      assert.equal(
        series(after, 'assay_dispatch_messages').length,
        3,
        "pg-boss's one queue (callbacks), three states",
      );
    }
  });

  test('an async item that ends in an error is counted as one; so is its failed download', async (t) => {
    const remote = await startLocalServer((_request, response) => {
      response.statusCode = 404;
      response.end('gone');
    });
    t.after(() => remote.close());
    const svc = await buildService(t, {
      ASSAY_CLAMD: clamd.socket,
      ASSAY_FETCH_ALLOW: '127.0.0.1/32',
    });
    const before = await scrape(svc.url);
    const fetched = await fetch(`${svc.url}/v2.2/files/fetch`, {
      method: 'POST',
      headers: { authorization: svc.auth, 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ location: `${remote.url}/missing` }).toString(),
    });
    assert.equal(fetched.status, 202);
    const { id } = (await fetched.json()) as { id: string };
    assert.ok((await pollResult(svc.url, svc.auth, id)).error);
    const after = await scrape(svc.url);
    assert.equal(moved(before, after, 'assay_items_total', { outcome: 'error' }), 1);
    assert.equal(moved(before, after, 'assay_items_total'), 1);
    assert.equal(moved(before, after, 'assay_scanned_bytes_total'), 0);
  });

  test('ASSAY_METRICS_TOKEN: 401 in the service’s shape without it (API keys do not do), 200 with it', async (t) => {
    const token = 'metrics-token-0123456789';
    const svc = await buildService(t, { ASSAY_CLAMD: clamd.socket, ASSAY_METRICS_TOKEN: token });
    for (const authorization of [
      undefined,
      svc.auth,
      `Bearer ${token}x`,
      `Bearer ${token.slice(1)}`,
    ]) {
      const response = await fetch(`${svc.url}/metrics`, {
        headers: authorization === undefined ? {} : { authorization },
      });
      assert.equal(response.status, 401);
      assert.match(response.headers.get('www-authenticate') ?? '', /^Bearer /);
      const body = (await response.json()) as { error: string };
      assert.match(body.error, /ASSAY_METRICS_TOKEN/);
    }
    const samples = await scrape(svc.url, { authorization: `Bearer ${token}` });
    assert.ok(total(samples, 'assay_processes') === 1);
    // Without the setting it is open: the other tests scrape with no credentials.
  });

  test('work waiting for a worker shows in the queue and spool gauges, read from the store', async (t) => {
    // Role api runs no job: what it accepts waits in the store.
    const svc = await buildService(t, { ASSAY_CLAMD: clamd.socket, ASSAY_ROLE: 'api' });
    const other = await svc.createAccountKey();
    for (const [auth, size] of [
      [svc.auth, 1000],
      [svc.auth, 2000],
      [other.auth, 2500],
    ] as const) {
      const accepted = await fetch(`${svc.url}/v2.2/files/async`, {
        method: 'POST',
        headers: { authorization: auth },
        body: uploadForm(randomContent(size)),
      });
      assert.equal(accepted.status, 202);
    }
    const samples = await scrape(svc.url);
    assert.equal(total(samples, 'assay_jobs_due'), 3);
    assert.ok(total(samples, 'assay_jobs_oldest_due_seconds') >= 0);
    assert.equal(total(samples, 'assay_jobs_running'), 0);
    assert.equal(total(samples, 'assay_spool_bytes'), 5500);
    assert.equal(total(samples, 'assay_spool_account_max_bytes'), 3000);
    assert.equal(total(samples, 'assay_processes', { role: 'api' }), 1);
    if (onPostgres) {
      // Jobs are claimed from the store's due list: pg-boss carries callbacks only.
      const queued = { queue: 'assay.callback', state: 'queued' };
      assert.equal(total(samples, 'assay_dispatch_messages', queued), 0);
      const queues = series(samples, 'assay_dispatch_messages').map(
        (sample) => sample.labels.queue,
      );
      assert.deepEqual(new Set(queues), new Set(['assay.callback']));
    }
  });

  test('a worker (role worker) answers its own /metrics beside /health', async (t) => {
    const svc = await buildService(t, { ASSAY_CLAMD: clamd.socket, ASSAY_ROLE: 'worker' });
    const samples = await scrape(svc.url);
    assert.equal(total(samples, 'assay_processes', { role: 'worker' }), 1);
    assert.equal(total(samples, 'assay_jobs_due'), 0);
    assert.equal((await fetch(`${svc.url}/v2.2/ping`)).status, 404, 'no API in a worker');
  });

  test('a value that fails or hangs at scrape time is left out and counted; the rest is scraped', async () => {
    const metrics = new MetricsRegistry(pino({ level: 'silent' }));
    const failing = metrics.part('failing', () => Promise.reject(new Error('store down')));
    const hanging = metrics.part('hanging', () => new Promise<number>(() => {}), 100);
    const working = metrics.part('working', async () => 7);
    for (const [name, part] of [
      ['test_failing', failing],
      ['test_hanging', hanging],
      ['test_working', working],
    ] as const) {
      metrics.scrapedGauge({ name, help: name }, part, (gauge, value) => gauge.set(value));
    }
    const samples = parseMetrics(await metrics.text());
    assert.deepEqual(series(samples, 'test_failing'), []);
    assert.deepEqual(series(samples, 'test_hanging'), []);
    assert.equal(total(samples, 'test_working'), 7);
    assert.equal(total(samples, 'assay_scrape_errors_total', { part: 'failing' }), 1);
    assert.equal(total(samples, 'assay_scrape_errors_total', { part: 'hanging' }), 1);
  });
});

describe(`GET /metrics of serve --processes 2 (${TEST_STORE})`, () => {
  test('one scrape sums both children', async (t) => {
    const dataDir = tempDir();
    t.after(() => rmSync(dataDir, { recursive: true, force: true }));
    const serve = await startServe(
      t,
      {
        ASSAY_DATA_DIR: dataDir,
        ASSAY_BOOTSTRAP_CREDENTIALS: 'key:secret',
        ASSAY_CLAMD: clamd.socket,
      },
      [],
      ['--processes', '2'],
    );
    const children = () =>
      serve.records.filter((r) => r.msg === 'process serving').map((r) => r.pid as number);
    await waitUntil('both processes serve', () => children().length === 2);
    const before = await scrape(serve.url);
    const pings = 20;
    for (let i = 0; i < pings; i++) {
      // A connection each: node:cluster hands connections to the children in turn.
      const answer = await httpRequest(`${serve.url}/v2.2/ping`, {
        headers: { authorization: basic('key', 'secret'), connection: 'close' },
      });
      assert.equal(answer.status, 200);
    }
    await sleep(100); // the children log each request as it completes
    const servedBy = new Set(
      serve.records
        .filter((r) => r.msg === 'request completed' && r.reqId !== undefined)
        .map((r) => r.pid),
    );
    assert.deepEqual([...servedBy].sort(), children().sort(), 'both children served pings');
    const after = await scrape(serve.url);
    const served = (samples: Sample[]) =>
      total(samples, 'assay_http_requests_total', {
        method: 'GET',
        route: '/v2.2/ping',
        status: '200',
      });
    assert.equal(served(after) - served(before), pings);
    assert.equal(total(after, 'assay_processes', { role: 'all' }), 1);
    assert.equal(total(after, 'assay_processes', { role: 'api' }), 1);
    assert.equal(total(after, 'assay_processes'), 2);
    // Store-wide values are the largest, not the sum: both children read the same setting.
    assert.equal(total(after, 'assay_spool_quota_bytes'), 5 * 1024 ** 3);
    assert.equal(total(after, 'assay_clamd_up'), 1);
    assert.equal(series(after, 'assay_clamd_info').length, 1);
    assert.equal(total(after, 'assay_clamd_info'), 1);
  });
});
