import '../helpers/loopback-only.js';
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { callbackLimitsEnv, traceMessages, uploadWithFields } from '../helpers/callbacks.js';
import { startLocalServer } from '../helpers/local-server.js';
import { buildService, useSharedClamd } from '../helpers/service.js';

// @run-alone: another destination's callback within 1 s; a burst of failures backed off in 3 s

const clamd = useSharedClamd();
const env = callbackLimitsEnv(clamd);

describe('callback limits', () => {
  test('deliveries to one destination run at most ASSAY_CALLBACK_DESTINATION_CONCURRENCY at once; others are not held', async (t) => {
    const svc = await buildService(t, env({ ASSAY_CALLBACK_DESTINATION_CONCURRENCY: '2' }));
    let current = 0;
    let most = 0;
    const slow = await startLocalServer(async (_request, response) => {
      current += 1;
      most = Math.max(most, current);
      await sleep(300);
      current -= 1;
      response.end();
    });
    const fast = await startLocalServer((_request, response) => response.end());
    t.after(async () => {
      await slow.close();
      await fast.close();
    });
    const uploads = Array.from({ length: 10 }, (_, i) =>
      uploadWithFields(svc, `slow ${i}`, { callback: `${slow.url}/hook/${i}?q=${i}` }),
    );
    for (const response of await Promise.all(uploads)) assert.equal(response.status, 201);
    // 10 deliveries, 2 at a time, 300 ms each: the slow receiver is busy for 1.5 s.
    assert.equal(
      (await uploadWithFields(svc, 'fast', { callback: `${fast.url}/hook` })).status,
      201,
    );
    const started = Date.now();
    await fast.waitFor(1, 5_000);
    const fastDelay = Date.now() - started;
    await slow.waitFor(10, 15_000);
    assert.equal(most, 2, `at most 2 in flight to one destination (saw ${most})`);
    assert.ok(fastDelay < 1_000, `another destination is not held back (${fastDelay} ms)`);
  });

  test('a destination that keeps failing is backed off as a whole, without using up the attempts of its deliveries', async (t) => {
    // 20 synchronous uploads at once: more than the default cap on synchronous scans.
    const svc = await buildService(
      t,
      env({ ASSAY_SYNC_CONCURRENCY: '32', ASSAY_ACCOUNT_SYNC_CONCURRENCY: '32' }),
    );
    let healthy = false;
    const receiver = await startLocalServer((_request, response) => {
      response.writeHead(healthy ? 200 : 503);
      response.end();
    });
    t.after(() => receiver.close());
    const deliveries = 20;
    const uploads = Array.from({ length: deliveries }, (_, i) =>
      uploadWithFields(svc, `item ${i}`, { callback: `${receiver.url}/hook/${i}` }),
    );
    const ids: string[] = [];
    for (const response of await Promise.all(uploads)) {
      assert.equal(response.status, 201);
      ids.push(((await response.json()) as { id: string }).id);
    }
    await sleep(3_000);
    // Retried one by one (100 ms, doubling), 20 deliveries would make ~6 attempts each in 3 s.
    const whileFailing = receiver.requests.length;
    t.diagnostic(`${whileFailing} attempts reached the failing destination in 3 s`);
    assert.ok(whileFailing < 40, `${whileFailing} attempts reached the failing destination in 3 s`);

    healthy = true;
    const deadline = Date.now() + 15_000;
    const delivered = () => new Set(receiver.requests.slice(whileFailing).map((r) => r.url));
    while (delivered().size < deliveries && Date.now() < deadline) await sleep(100);
    assert.equal(delivered().size, deliveries, 'every delivery arrives once the receiver is back');
    const attemptNumbers = receiver.requests
      .slice(whileFailing)
      .map((r) => Number(r.headers['x-assay-attempt']));
    t.diagnostic(`attempt numbers once it was back: ${attemptNumbers.join(', ')}`);
    const early = attemptNumbers.filter((n) => n <= 2).length;
    assert.ok(
      early >= deliveries - 5,
      `held-back deliveries kept their attempts: ${attemptNumbers.join(', ')}`,
    );
    const held = (await Promise.all(ids.map((id) => traceMessages(svc.url, svc.auth, id)))).flat();
    assert.ok(
      held.some((m) => /HTTP 503; next attempt at .* \(its destination keeps failing\)/.test(m)),
      held.join(' | '),
    );
  });
});
