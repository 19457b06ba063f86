import assert from 'node:assert/strict';
import { once } from 'node:events';
import { existsSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { describe, type TestContext, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { eicar } from '../../src/engines/test-content.js';
import { assayCliAsync, type ServeProcess, signalGroup, startServe } from '../helpers/cli.js';
import { waitUntil } from '../helpers/client.js';
import { uploadForm } from '../helpers/content.js';
import { basic, tempDir } from '../helpers/service.js';
import { storeEnv } from '../helpers/test-database.js';

function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  // An orphan that ended stays a zombie until init reaps it.
  try {
    return !/\) Z /.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
}

function managedDataDir(t: TestContext): string {
  const dataDir = tempDir();
  t.after(() => rmSync(dataDir, { recursive: true, force: true }));
  return dataDir;
}

async function startManagedServe(t: TestContext, dataDir = managedDataDir(t)) {
  const serve = await startServe(t, {
    ASSAY_DATA_DIR: dataDir,
    ASSAY_BOOTSTRAP_CREDENTIALS: 'key:secret',
  });
  assert.ok(serve.clamdPid > 0 && isRunning(serve.clamdPid), 'clamd runs as a child');
  return { ...serve, dataDir };
}

/** That a serve on a data dir whose clamd another process runs used that one's socket. */
function assertUsedOthersClamd(serve: ServeProcess): void {
  assert.equal(serve.clamdPid, 0, `no clamd of its own: ${serve.messages.join(' | ')}`);
  assert.ok(
    serve.messages.includes("another process runs this data dir's clamd: using its socket"),
    serve.messages.join(' | '),
  );
}

/** An upload of EICAR: its status, and its findings when it was scanned. */
async function scanEicar(url: string): Promise<string> {
  const response = await fetch(`${url}/v2.2/files`, {
    method: 'POST',
    headers: { authorization: basic('key', 'secret') },
    body: uploadForm(eicar()),
  });
  const body = await response.text();
  if (response.status !== 201) return `${response.status} ${body}`;
  return `${response.status} ${(JSON.parse(body) as { findings: string[] }).findings.join(',')}`;
}

const FLAGGED = '201 content.malicious.eicar-test-signature';

/** Until an upload of EICAR is flagged again (clamd restarted or taken over), for up to a minute. */
async function untilScanning(url: string, why: string): Promise<void> {
  let last = '';
  for (const deadline = Date.now() + 60_000; Date.now() < deadline; await sleep(250)) {
    last = await scanEicar(url);
    if (last === FLAGGED) return;
  }
  assert.fail(`${why}: uploads still answer ${last}`);
}

async function readyStatus(url: string): Promise<number> {
  return (await fetch(`${url}/health/ready`)).status;
}

/** Each entry of the data dir's clamd folder with its inode: what a process that only reads leaves as it is. */
function clamdFolder(dataDir: string): string[] {
  const dir = join(dataDir, 'clamd');
  return readdirSync(dir).map((name) => `${name}:${statSync(join(dir, name)).ino}`);
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
    signalGroup(child, 'SIGINT');
    const [code] = await once(child, 'exit');
    assert.equal(code, 0);
    assert.equal(isRunning(clamdPid), false, 'clamd stopped with the service');
    assert.ok(!messages.some((m) => /restart/.test(m)), `no restart: ${messages.join(' | ')}`);
  });
});

describe('serve processes sharing one data dir', () => {
  test("a second serve on the data dir scans with the first's clamd; the first scans on while it starts and after it stops", async (t) => {
    const first = await startManagedServe(t);
    const folder = clamdFolder(first.dataDir);
    // The first's uploads go on the whole time the second starts, serves and stops: paced under
    // the key's rate limit (100/s), which back to back they now pass.
    let uploading = true;
    const answers: string[] = [];
    const uploads = (async () => {
      while (uploading) {
        answers.push(await scanEicar(first.url));
        await sleep(20);
      }
    })();
    const second = await startServe(t, {
      ASSAY_DATA_DIR: first.dataDir,
      ASSAY_BOOTSTRAP_CREDENTIALS: 'key:secret',
    });
    assert.equal(await scanEicar(second.url), FLAGGED);
    second.child.kill('SIGTERM');
    const [code] = await once(second.child, 'exit');
    assert.equal(code, 0);
    answers.push(await scanEicar(first.url));
    uploading = false;
    await uploads;
    assert.deepEqual(
      answers.filter((answer) => answer !== FLAGGED),
      [],
      `every upload to the first was scanned (${answers.length})`,
    );
    assert.equal(await readyStatus(first.url), 200);
    assert.ok(isRunning(first.clamdPid), "the first's clamd runs on");
    assert.deepEqual(clamdFolder(first.dataDir), folder, 'the second left the clamd folder alone');
    assertUsedOthersClamd(second);
  });

  test("the clamd's process killed with SIGKILL: the other serve on the data dir runs it and scans again", async (t) => {
    const first = await startManagedServe(t);
    const second = await startServe(t, {
      ASSAY_DATA_DIR: first.dataDir,
      ASSAY_BOOTSTRAP_CREDENTIALS: 'key:secret',
    });
    first.child.kill('SIGKILL');
    await once(first.child, 'exit');
    await untilScanning(second.url, 'no other process ran clamd');
    // (Logged once its databases' load is recorded, which may come after its first answers.)
    await waitUntil('the second says it runs clamd', () =>
      second.messages.includes('clamd started'),
    );
    assert.equal(await readyStatus(second.url), 200);
    // (Told by the kernel when its parent died, it may take a moment to end.)
    await waitUntil("the killed process's clamd ends", () => !isRunning(first.clamdPid), 30_000);
    assertUsedOthersClamd(second);
  });

  test('a serve --processes 2 on the data dir: its children scan with the clamd another serve runs, and its primary runs it when that one is killed', async (t) => {
    const first = await startManagedServe(t);
    const cluster = await startServe(
      t,
      { ASSAY_DATA_DIR: first.dataDir, ASSAY_BOOTSTRAP_CREDENTIALS: 'key:secret' },
      [],
      ['--processes', '2'],
    );
    assert.equal(await scanEicar(cluster.url), FLAGGED);
    first.child.kill('SIGKILL');
    await once(first.child, 'exit');
    await untilScanning(cluster.url, 'the primary did not run clamd');
    assertUsedOthersClamd(cluster);
    await waitUntil('the primary says it runs clamd', () =>
      cluster.messages.includes('clamd started'),
    );
  });

  test('its socket removed by hand, clamd is restarted and scans again', async (t) => {
    const serve = await startManagedServe(t);
    rmSync(join(serve.dataDir, 'clamd', 'clamd.sock'));
    await untilScanning(serve.url, 'clamd was not restarted');
    assert.ok(
      serve.messages.includes('clamd socket is gone; restarting clamd'),
      serve.messages.join(' | '),
    );
    assert.equal(isRunning(serve.clamdPid), false, 'the clamd without a socket was stopped');
  });

  test('a serve on a port in use exits with one line naming ASSAY_PORT, touching nothing; the first stays ready', async (t) => {
    const first = await startManagedServe(t);
    const port = new URL(first.url).port;
    const folder = clamdFolder(first.dataDir);
    const fresh = join(tempDir(), 'data');
    t.after(() => rmSync(join(fresh, '..'), { recursive: true, force: true }));
    for (const dataDir of [first.dataDir, fresh]) {
      const run = await assayCliAsync(['serve'], {
        env: { ASSAY_DATA_DIR: dataDir, ASSAY_PORT: port, ...storeEnv(first.dataDir) },
      });
      assert.equal(run.status, 1, run.stderr);
      assert.equal(run.stdout, '', 'no log: it started nothing');
      assert.match(
        run.stderr,
        new RegExp(
          `^assay: port ${port} on 127\\.0\\.0\\.1 is already in use\\b.*ASSAY_PORT[^\\n]*\\n$`,
        ),
      );
    }
    assert.equal(existsSync(fresh), false, 'a data dir that was not there is not made');
    assert.deepEqual(clamdFolder(first.dataDir), folder, "the first's clamd folder is as it was");
    assert.equal(await readyStatus(first.url), 200);
    assert.equal(await scanEicar(first.url), FLAGGED);
  });
});
