import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { eicar } from '../../src/engines/test-content.js';
import { uploadForm } from '../helpers/content.js';
import { buildService } from '../helpers/service.js';

async function upload(url: string, auth: string, content: string) {
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
