import '../helpers/loopback-only.js';
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { pollResult, submitFetch } from '../helpers/client.js';
import { useNeverAnsweringRemote } from '../helpers/local-server.js';
import { buildService, useSharedClamd } from '../helpers/service.js';

const clamd = useSharedClamd();
// A stand-in for remote servers: /never accepts the request and never answers.
const remote = useNeverAnsweringRemote();
const { requestsFor } = remote;

describe('async work is shared fairly between accounts', () => {
  test('accounts take turns: with one slot, B is served between A’s jobs, not after all of them', async (t) => {
    const svc = await buildService(t, {
      ASSAY_CLAMD: clamd.socket,
      ASSAY_FETCH_ALLOW: '127.0.0.1/32',
      ASSAY_FETCH_CONCURRENCY: '1',
      ASSAY_JOB_CONCURRENCY: '1',
      ASSAY_FETCH_TIMEOUT: '1',
    });
    // A's first download holds the only download slot for a second; meanwhile both queue more.
    await submitFetch(svc.url, svc.auth, `${remote.url}/never/a0`);
    await sleep(200);
    for (let i = 1; i <= 3; i++) await submitFetch(svc.url, svc.auth, `${remote.url}/never/a${i}`);
    const b = await svc.createAccountKey();
    const bId = await submitFetch(svc.url, b.auth, `${remote.url}/b`);
    await pollResult(svc.url, b.auth, bId, 10_000);
    // B came right after A's first job (each of A's ends at its 1 s deadline), not after all 4.
    assert.ok(
      requestsFor('/never/a') <= 2,
      `A's requests before B finished: ${requestsFor('/never/a')}`,
    );
  });
});
