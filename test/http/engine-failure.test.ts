import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { eicar } from '../../src/engines/test-content.js';
import { uploadForm } from '../helpers/content.js';
import { buildService, startSharedClamd } from '../helpers/service.js';
import { startTcpProxyTo } from '../helpers/tcp-proxy.js';

async function upload(url: string, auth: string, content: string | Buffer) {
  const response = await fetch(`${url}/v2.2/files`, {
    method: 'POST',
    headers: { authorization: auth },
    body: uploadForm(content),
  });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

describe('when the malware engine cannot scan', () => {
  test('clamd killed while serving: 503 (never a clean result), then it recovers on its own', async (t) => {
    // Managed mode: the service starts and supervises its own clamd.
    const svc = await buildService(t, { ASSAY_CLAMD: 'managed' });
    const managed = svc.service.managedClamd;
    assert.ok(managed?.pid, 'the service runs its own clamd');
    const before = await upload(svc.url, svc.auth, eicar());
    assert.deepEqual(before.body.findings, ['content.malicious.eicar-test-signature']);

    process.kill(managed.pid, 'SIGKILL');
    const outcomes: number[] = [];
    const deadline = Date.now() + 60_000;
    let recovered: Record<string, unknown> | null = null;
    while (Date.now() < deadline) {
      const { status, body } = await upload(svc.url, svc.auth, `clean text ${Date.now()}`);
      outcomes.push(status);
      if (status === 201) {
        recovered = body;
        break;
      }
      assert.equal(status, 503, JSON.stringify(body));
      assert.equal('findings' in body, false);
      assert.match(String(body.error), /malware/);
      assert.ok(!String(body.error).includes(svc.dataDir), 'no path of the service in the answer');
      await sleep(100);
    }
    assert.equal(outcomes[0], 503, 'the first upload after the kill is refused');
    assert.ok(recovered, 'clamd came back within 60 s');
    const after = await upload(svc.url, svc.auth, eicar());
    assert.deepEqual(after.body.findings, ['content.malicious.eicar-test-signature']);
  });

  test('a clamd session cut mid-stream: 503 (never a clean result), and nothing recorded', async (t) => {
    const clamd = await startSharedClamd();
    t.after(() => clamd.stop());
    const proxy = await startTcpProxyTo({ path: clamd.socket });
    t.after(() => proxy.close());
    const svc = await buildService(t, { ASSAY_CLAMD: `tcp://${proxy.address}` });
    const first = await upload(svc.url, svc.auth, `clean text ${Date.now()}`);
    assert.equal(first.status, 201);
    assert.deepEqual(first.body.findings, []);
    // EICAR at the end: what clamd receives before the cut is clean. Small enough for a session.
    const content = Buffer.concat([randomBytes(200 * 1024), Buffer.from(`\n${eicar()}\n`)]);

    // Cut 64 KB into the stream on the session the first upload opened, clamd then out of reach.
    proxy.cutAfter(64 * 1024);
    const cut = await upload(svc.url, svc.auth, content);
    assert.equal(cut.status, 503, JSON.stringify(cut.body));
    assert.equal('findings' in cut.body, false);
    assert.match(String(cut.body.error), /malware/);
    proxy.restore();

    // Cut the same way with clamd reachable: the item is scanned whole on a connection of its own.
    proxy.cutAfter(64 * 1024, { refuse: false });
    const retried = await upload(svc.url, svc.auth, content);
    assert.equal(retried.status, 201, JSON.stringify(retried.body));
    assert.deepEqual(retried.body.findings, ['content.malicious.eicar-test-signature']);

    // Only the two answered uploads left a result.
    const files = await svc.store.db.selectFrom('files').select('id').execute();
    assert.deepEqual(files.map((file) => file.id).sort(), [first.body.id, retried.body.id].sort());
  });

  test('an external clamd that is not there: 503 for uploads, 503 for readiness', async (t) => {
    const svc = await buildService(t, { ASSAY_CLAMD: '/nonexistent/clamd.sock' });
    const { status, body } = await upload(svc.url, svc.auth, 'hello');
    assert.equal(status, 503);
    assert.match(String(body.error), /clamd's socket does not exist/);
    assert.ok(!String(body.error).includes('/nonexistent'), 'the socket path is not disclosed');
    assert.equal('findings' in body, false);
    const ready = await fetch(`${svc.url}/health/ready`);
    assert.equal(ready.status, 503);
    const live = await fetch(`${svc.url}/health/live`);
    assert.equal(live.status, 200);
  });
});
