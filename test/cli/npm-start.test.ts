import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, rmSync } from 'node:fs';
import { describe, test } from 'node:test';
import { serving, signalGroup } from '../helpers/cli.js';
import { tempDir } from '../helpers/service.js';
import { prepareStore, TEST_POOL_ENV } from '../helpers/test-database.js';

function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/**
 * The README's first command, `npm start`, as a person runs it at a terminal: npm runs the
 * package's start script through a shell, and Ctrl-C sends SIGINT to the whole process group.
 */
describe('npm start', () => {
  test('Ctrl-C (SIGINT to the process group) stops the service and npm exits 0, as the README says', async (t) => {
    assert.ok(existsSync('dist/main.js'), 'npm start runs the build: run `npm run build` first');
    const dataDir = tempDir();
    t.after(() => rmSync(dataDir, { recursive: true, force: true }));
    const npm = spawn('npm', ['start'], {
      env: {
        ...process.env,
        ASSAY_PORT: '0',
        ASSAY_DATA_DIR: dataDir,
        ...TEST_POOL_ENV,
        ...(await prepareStore(dataDir)),
      },
      stdio: ['ignore', 'pipe', 'inherit'],
      detached: true,
    });
    t.after(() => {
      if (npm.exitCode === null && npm.signalCode === null) signalGroup(npm, 'SIGKILL');
    });
    const { url, clamdPid, records } = await serving(t, npm);
    const servicePid = records.find((record) => record.msg === 'assay is serving')?.pid ?? 0;
    assert.equal((await fetch(`${url}/health/live`)).status, 200);

    signalGroup(npm, 'SIGINT');
    const [code, signal] = await once(npm, 'exit');
    assert.deepEqual({ code, signal }, { code: 0, signal: null }, 'npm exits 0, not 130');
    assert.equal(isRunning(servicePid), false, 'the service stopped before npm exited');
    assert.equal(isRunning(clamdPid), false, 'clamd stopped with the service');
  });
});
