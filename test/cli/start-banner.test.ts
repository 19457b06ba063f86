import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, type TestContext, test } from 'node:test';
import { signalGroup, startServe } from '../helpers/cli.js';
import { nodeArgsOf } from '../helpers/entry.js';
import { tempDir } from '../helpers/service.js';
import { onPostgres, prepareStore, TEST_POOL_ENV } from '../helpers/test-database.js';

// Chromium's Accept for a page it navigates to.
const BROWSER_ACCEPT = 'text/html,application/xhtml+xml,*/*;q=0.8';

/** A data dir, and a clamd database folder without official databases (whatever the machine has). */
function dataDirs(t: TestContext): { dataDir: string; env: Record<string, string> } {
  const dataDir = tempDir();
  t.after(() => rmSync(dataDir, { recursive: true, force: true }));
  const official = join(dataDir, 'no-official-databases');
  mkdirSync(official);
  return { dataDir, env: { ASSAY_DATA_DIR: dataDir, ASSAY_CLAMD_DATABASE_DIR: official } };
}

/**
 * Runs `assay serve` on a pseudo-terminal (util-linux `script`), as a person at a terminal does,
 * and reads what the terminal shows until the banner's last line.
 */
async function serveOnTerminal(t: TestContext, env: Record<string, string>) {
  const command = [process.execPath, ...nodeArgsOf('src/main.ts'), 'serve'].join(' ');
  const child = spawn('script', ['-qfec', command, '/dev/null'], {
    env: {
      ...process.env,
      ASSAY_PORT: '0',
      ...TEST_POOL_ENV,
      ...(await prepareStore(env.ASSAY_DATA_DIR ?? '')),
      ...env,
    },
    stdio: ['ignore', 'pipe', 'inherit'],
    detached: true,
  });
  t.after(() => {
    if (child.exitCode === null) signalGroup(child, 'SIGKILL');
  });
  let shown = '';
  await new Promise<void>((resolve, reject) => {
    child.stdout?.on('data', (chunk: Buffer) => {
      shown += chunk.toString().replaceAll('\r', '');
      // The banner and the JSON log line go out on separate writes, in no fixed order.
      if (/\n {2}Store .*\n/.test(shown) && /"msg":"assay is serving".*\n/.test(shown)) resolve();
    });
    child.on('exit', () => reject(new Error(`serve ended before its banner:\n${shown}`)));
    // A generous bound on a shared machine: without a banner the service would serve on.
    setTimeout(() => reject(new Error(`no banner after 120 s:\n${shown}`)), 120_000).unref();
  });
  const lines = shown.split('\n');
  // The service's pid, from its JSON log, to stop it as a terminal's Ctrl-C would.
  const serving = lines.find((line) => line.includes('"msg":"assay is serving"')) ?? '{}';
  const pid = (JSON.parse(serving) as { pid?: number }).pid ?? 0;
  // Never 0: process.kill(0) would signal this test's own process group.
  assert.ok(pid > 0, `the service's pid in its log:\n${shown}`);
  return {
    lines,
    async stop() {
      process.kill(pid, 'SIGINT');
      await once(child, 'exit');
    },
  };
}

describe('assay serve: where things are', () => {
  test('on a terminal: a banner with the API, console and docs URLs, the store, and a warning about test signatures', async (t) => {
    const { dataDir, env } = dataDirs(t);
    const terminal = await serveOnTerminal(t, env);
    const banner = terminal.lines.slice(
      terminal.lines.findIndex((line) => /^Assay \S+ is serving/.test(line)),
    );
    const url = /^ {2}API +(http:\/\/127\.0\.0\.1:\d+)$/.exec(banner[1] ?? '')?.[1];
    assert.ok(url !== undefined, `the API's URL: ${banner.join('\n')}`);
    assert.equal(banner[2], `  Console  ${url}/console`);
    assert.equal(banner[3], `  API docs ${url}/docs`);
    if (!onPostgres) assert.equal(banner[4], `  Store    SQLite in ${dataDir}`);
    else assert.match(banner[4] ?? '', /^ {2}Store {4}PostgreSQL at 127\.0\.0\.1:5432\/\w+$/);
    assert.match(
      banner[5] ?? '',
      /^Warning: clamd has only Assay's test signatures: .*not real malware/,
    );
    // What it names is there.
    const consolePage = await fetch(`${url}/console`, { headers: { accept: BROWSER_ACCEPT } });
    assert.match(consolePage.url, /\/console\/sign-in/);
    assert.equal((await fetch(`${url}/docs`)).status, 200);
    await terminal.stop();
  });

  test('not on a terminal: one log line says the same, a warning when clamd has only test signatures', async (t) => {
    const { dataDir, env } = dataDirs(t);
    const { records, url } = await startServe(t, env);
    const serving = records.find((record) => record.msg === 'assay is serving');
    assert.equal(serving?.level, 40, 'a warning');
    assert.equal(serving?.console, `${url}/console`);
    assert.equal(serving?.docs, `${url}/docs`);
    assert.match(String(serving?.store), onPostgres ? /^PostgreSQL at / : /^SQLite in /);
    if (!onPostgres) assert.equal(serving?.store, `SQLite in ${dataDir}`);
    assert.match(String(serving?.warning), /^clamd has only Assay's test signatures/);
  });

  test('with another database loaded, no warning', async (t) => {
    const { dataDir, env } = dataDirs(t);
    const signatures = join(dataDir, 'signatures');
    mkdirSync(signatures);
    const marker = Buffer.from('assay banner test marker').toString('hex');
    writeFileSync(join(signatures, 'extra.ndb'), `Assay-Banner-Test:0:*:${marker}\n`);
    const { records } = await startServe(t, { ...env, ASSAY_SIGNATURES_DIR: signatures });
    const serving = records.find((record) => record.msg === 'assay is serving');
    assert.equal(serving?.level, 30);
    assert.equal(serving?.warning, undefined);
  });
});
