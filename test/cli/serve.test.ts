import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { rmSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { describe, test } from 'node:test';
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

describe('assay serve', () => {
  test('serves with its own clamd, and SIGTERM stops both cleanly', async (t) => {
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
    });
    t.after(() => child.kill('SIGKILL'));
    let url = '';
    let clamdPid = 0;
    for await (const line of createInterface({ input: child.stdout })) {
      const record = JSON.parse(line) as { msg?: string; url?: string; pid?: number };
      if (record.msg === 'clamd started') clamdPid = record.pid ?? 0;
      if (record.msg === 'assay is serving') {
        url = record.url ?? '';
        break;
      }
    }
    assert.match(url, /^http:\/\/127\.0\.0\.1:\d+$/);
    assert.ok(clamdPid > 0 && isRunning(clamdPid), 'clamd runs as a child');
    child.stdout.resume();

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
});
