import '../helpers/loopback-only.js';
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { submitAsync } from '../helpers/client.js';
import { randomContent, sha1 } from '../helpers/content.js';
import { buildService, useSharedClamd } from '../helpers/service.js';

// @run-alone: each async result readable within 500 ms of its 202

const clamd = useSharedClamd();
const env = () => ({ ASSAY_CLAMD: clamd.socket });

/**
 * Reads an item's result as soon as it is there, and at the latest `ms` after now: while it
 * answers 404 and `ms` has not passed, it reads again. What a read after a sleep of `ms` checks,
 * without the sleep where the result came sooner. Every 50 ms: the reads are served by the process
 * that does the job, and must not be what delays it.
 */
async function readWithin(url: string, auth: string, id: string, ms: number): Promise<Response> {
  const due = performance.now() + ms;
  for (;;) {
    const read = await fetch(`${url}/v2.2/files/${id}`, { headers: { authorization: auth } });
    if (read.status !== 404 || performance.now() >= due) return read;
    await read.arrayBuffer();
    await sleep(Math.min(50, Math.max(0, due - performance.now())));
  }
}

describe('POST /files/async', () => {
  test('small content is retrievable (200) within 500 ms of the 202, every time', async (t) => {
    const svc = await buildService(t, env());
    for (let i = 0; i < 20; i++) {
      const content = randomContent(4096);
      const { body } = await submitAsync(svc.url, svc.auth, content);
      const read = await readWithin(svc.url, svc.auth, String(body.id), 500);
      assert.equal(read.status, 200, `submission ${i}`);
      assert.equal(((await read.json()) as Record<string, unknown>).checksum, sha1(content));
    }
  });
});
