import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { rmSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { describe, type TestContext, test } from 'node:test';
import { eicar } from '../../src/engines/test-content.js';
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

/** Starts the real CLI in its own process group (as a terminal would) and reads its log. */
async function startServe(t: TestContext) {
  const dataDir = tempDir();
  t.after(() => rmSync(dataDir, { recursive: true, force: true }));
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts', 'serve'], {
    env: {
      ...process.env,
      ASSAY_PORT: '0',
      ASSAY_DATA_DIR: dataDir,
      ASSAY_BOOTSTRAP_CREDENTIALS: 'key:secret',
    },
    stdio: ['ignore', 'pipe', 'inherit'],
    detached: true,
  });
  t.after(() => child.kill('SIGKILL'));
  const messages: string[] = [];
  let url = '';
  let clamdPid = 0;
  const lines = createInterface({ input: child.stdout });
  for await (const line of lines) {
    const record = JSON.parse(line) as { msg?: string; url?: string; pid?: number };
    messages.push(record.msg ?? '');
    if (record.msg === 'clamd started') clamdPid = record.pid ?? 0;
    if (record.msg === 'assay is serving') {
      url = record.url ?? '';
      break;
    }
  }
  lines.on('line', (line) => messages.push((JSON.parse(line) as { msg?: string }).msg ?? ''));
  assert.match(url, /^http:\/\/127\.0\.0\.1:\d+$/);
  assert.ok(clamdPid > 0 && isRunning(clamdPid), 'clamd runs as a child');
  return { child, url, clamdPid, messages };
}

describe('assay serve', () => {
  test('serves with its own clamd, and SIGTERM stops both cleanly', async (t) => {
    const { child, url, clamdPid } = await startServe(t);

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
    const { child, clamdPid, messages } = await startServe(t);
    process.kill(-(child.pid ?? 0), 'SIGINT');
    const [code] = await once(child, 'exit');
    assert.equal(code, 0);
    assert.equal(isRunning(clamdPid), false, 'clamd stopped with the service');
    assert.ok(!messages.some((m) => /restart/.test(m)), `no restart: ${messages.join(' | ')}`);
  });
});
