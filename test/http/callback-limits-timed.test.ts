import '../helpers/loopback-only.js';
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { callbackLimitsEnv, uploadWithFields } from '../helpers/callbacks.js';
import { startLocalServer } from '../helpers/local-server.js';
import { buildService, useSharedClamd } from '../helpers/service.js';

// @run-alone: another destination's callback within 1 s of a slow one's

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
});
