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

describe('POST /files/async', () => {
  test('small content is retrievable (200) within 500 ms of the 202, every time', async (t) => {
    const svc = await buildService(t, env());
    for (let i = 0; i < 20; i++) {
      const content = randomContent(4096);
      const { body } = await submitAsync(svc.url, svc.auth, content);
      await sleep(500);
      const read = await fetch(`${svc.url}/v2.2/files/${body.id}`, {
        headers: { authorization: svc.auth },
      });
      assert.equal(read.status, 200, `submission ${i}`);
      assert.equal(((await read.json()) as Record<string, unknown>).checksum, sha1(content));
    }
  });
});
