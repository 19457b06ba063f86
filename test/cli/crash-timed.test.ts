import '../helpers/loopback-only.js';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { rmSync } from 'node:fs';
import { describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { startServe } from '../helpers/cli.js';
import { waitUntil } from '../helpers/client.js';
import { startLocalServer } from '../helpers/local-server.js';
import { basic, tempDir, useSharedClamd } from '../helpers/service.js';

// @run-alone: a SIGTERMed serve must exit within 5.5 s (3-s grace)

const clamd = useSharedClamd();

const AUTH = basic('key', 'secret');

describe('shutdown', () => {
  test('SIGTERM lets a running job finish within the grace, parks one that does not, and both complete', async (t) => {
    const dataDir = tempDir();
    t.after(() => rmSync(dataDir, { recursive: true, force: true }));
    // A remote that answers /quick after 1 s and /slow after 6 s, past the grace. What the second
    // life fetches again (the parked /slow) it answers after 1 s: that wait tells nothing more.
    const remote = await startLocalServer(async (request, response) => {
      const slowAgain = remote.requests.filter((r) => r.url === '/slow').length > 1;
      await sleep(request.url === '/slow' && !slowAgain ? 6_000 : 1_000);
      response.end(`content of ${request.url} ${Date.now()}`);
    });
    t.after(() => remote.close());
    const common = {
      ASSAY_DATA_DIR: dataDir,
      ASSAY_BOOTSTRAP_CREDENTIALS: 'key:secret',
      ASSAY_FETCH_ALLOW: '127.0.0.1/32',
      ASSAY_CLAMD: clamd.socket,
      ASSAY_SHUTDOWN_GRACE: '3',
    };
    const first = await startServe(t, common);
    const ids: string[] = [];
    for (const path of ['/quick', '/slow']) {
      const response = await fetch(`${first.url}/v2.2/files/fetch`, {
        method: 'POST',
        headers: { authorization: AUTH, 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ location: `${remote.url}${path}` }).toString(),
      });
      ids.push(((await response.json()) as { id: string }).id);
    }
    // Both downloads are running when the signal comes (waitFor would wait for the answers).
    await waitUntil('both downloads started', () => remote.requests.length === 2, 10_000);
    const stopping = Date.now();
    first.child.kill('SIGTERM');
    const [code] = await once(first.child, 'exit');
    assert.equal(code, 0);
    assert.ok(Date.now() - stopping < 5_500, 'exits once the grace is over');
    assert.ok(
      first.messages.some((m) => /parked/.test(m)),
      first.messages.join(' | '),
    );

    const second = await startServe(t, common);
    for (const id of ids) {
      const deadline = Date.now() + 20_000;
      let status = 0;
      while (Date.now() < deadline) {
        const response = await fetch(`${second.url}/v2.2/files/${id}`, {
          headers: { authorization: AUTH },
        });
        status = response.status;
        await response.arrayBuffer();
        if (status === 200) break;
        await sleep(100);
      }
      assert.equal(status, 200, `job ${id} completed`);
    }
    second.child.kill('SIGTERM');
    await once(second.child, 'exit');
  });
});
