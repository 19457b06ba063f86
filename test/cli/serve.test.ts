import assert from 'node:assert/strict';
import { once } from 'node:events';
import { rmSync } from 'node:fs';
import { describe, type TestContext, test } from 'node:test';
import { eicar } from '../../src/engines/test-content.js';
import { startServe } from '../helpers/cli.js';
import { uploadForm } from '../helpers/content.js';
import { basic, tempDir } from '../helpers/service.js';

function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function startManagedServe(t: TestContext) {
  const dataDir = tempDir();
  t.after(() => rmSync(dataDir, { recursive: true, force: true }));
  const serve = await startServe(t, {
    ASSAY_DATA_DIR: dataDir,
    ASSAY_BOOTSTRAP_CREDENTIALS: 'key:secret',
  });
  assert.ok(serve.clamdPid > 0 && isRunning(serve.clamdPid), 'clamd runs as a child');
  return serve;
}

describe('assay serve', () => {
  test('serves with its own clamd, and SIGTERM stops both cleanly', async (t) => {
    const { child, url, clamdPid } = await startManagedServe(t);

    const response = await fetch(`${url}/v2.2/files`, {
      method: 'POST',
      headers: { authorization: basic('key', 'secret') },
      body: uploadForm(eicar()),
    });
    assert.equal(response.status, 201);
    assert.deepEqual(((await response.json()) as { findings: string[] }).findings, [
      'content.malicious.eicar-test-signature',
    ]);

    child.kill('SIGTERM');
    const [code] = await once(child, 'exit');
    assert.equal(code, 0);
    assert.equal(isRunning(clamdPid), false, 'clamd stopped with the service');
  });

  test('Ctrl-C at a terminal (SIGINT to the process group) stops both without a restart', async (t) => {
    const { child, clamdPid, messages } = await startManagedServe(t);
    process.kill(-(child.pid ?? 0), 'SIGINT');
    const [code] = await once(child, 'exit');
    assert.equal(code, 0);
    assert.equal(isRunning(clamdPid), false, 'clamd stopped with the service');
    assert.ok(!messages.some((m) => /restart/.test(m)), `no restart: ${messages.join(' | ')}`);
  });
});
