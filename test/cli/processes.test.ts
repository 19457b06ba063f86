import '../helpers/loopback-only.js';
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { describe, test } from 'node:test';
import { assayCli, type ServeProcess, startServe } from '../helpers/cli.js';
import { waitUntil } from '../helpers/client.js';
import { uploadForm } from '../helpers/content.js';
import { basic, tempDir, useSharedClamd } from '../helpers/service.js';
import { freshPostgresDatabase, onPostgres } from '../helpers/test-database.js';

// @run-alone: a rate limit counted over 2 s of wall clock; a refusal within 1 s

const clamd = useSharedClamd();
const AUTH = basic('key', 'secret');

const ping = (serve: ServeProcess, auth: string) =>
  fetch(`${serve.url}/v2.2/ping`, { headers: { authorization: auth } }).then((r) => r.status);

/** Two `assay serve` processes on one PostgreSQL database, each with a data dir of its own. */
async function twoProcesses(t: Parameters<typeof startServe>[0], env: Record<string, string>) {
  const database = await freshPostgresDatabase();
  const dirs = [tempDir(), tempDir()];
  t.after(() => {
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });
  const common = {
    ASSAY_DATABASE_URL: database,
    ASSAY_BOOTSTRAP_CREDENTIALS: 'key:secret',
    ASSAY_CLAMD: clamd.socket,
    ...env,
  };
  const first = await startServe(t, { ...common, ASSAY_DATA_DIR: dirs[0] as string });
  const second = await startServe(t, { ...common, ASSAY_DATA_DIR: dirs[1] as string });
  return { database, dirs: dirs as [string, string], first, second };
}

describe('processes sharing one PostgreSQL store', {
  skip: onPostgres ? false : 'runs in the PostgreSQL pass (npm run test:postgres)',
}, () => {
  test('results, tokens and keys are the same in both; revoking and disabling hold in both at once', async (t) => {
    const { database, dirs, first, second } = await twoProcesses(t, {});
    const uploaded = await fetch(`${first.url}/v2.2/files`, {
      method: 'POST',
      headers: { authorization: AUTH },
      body: uploadForm('scanned by the first process'),
    });
    assert.equal(uploaded.status, 201);
    const { id } = (await uploaded.json()) as { id: string };
    const read = await fetch(`${second.url}/v2.2/files/${id}`, {
      headers: { authorization: AUTH },
    });
    assert.equal(read.status, 200, 'read back through the other process');

    const made = await fetch(`${first.url}/v2.2/auth/tokens`, {
      method: 'POST',
      headers: { authorization: AUTH },
    });
    const tokenId = ((await made.json()) as { id: string }).id;
    const token = basic(tokenId, '');
    assert.equal(await ping(second, token), 200, 'a token made in one works in the other');
    const revoked = await fetch(`${second.url}/v2.2/auth/tokens/${tokenId}`, {
      method: 'DELETE',
      headers: { authorization: AUTH },
    });
    assert.equal(revoked.status, 204);
    // Each process reuses credentials for ASSAY_CREDENTIAL_CACHE_MS: refused by the other within it.
    await waitUntil(
      'revoked in one, refused by the other',
      async () => (await ping(first, token)) === 401,
      1000,
    );

    const disabled = assayCli(dirs[0], ['admin', 'key', 'disable', 'key'], undefined, {
      ASSAY_DATABASE_URL: database,
    });
    assert.equal(disabled.status, 0, disabled.stderr);
    for (const serve of [first, second]) {
      await waitUntil('disabled, refused', async () => (await ping(serve, AUTH)) === 401, 1000);
    }
  });

  test("a key's rate limit holds across the processes; so does the failed-authentication limit", async (t) => {
    const { first, second } = await twoProcesses(t, {
      ASSAY_RATE_LIMIT: '5',
      ASSAY_RATE_BURST: '5',
      ASSAY_AUTH_FAIL_RATE: '0.01',
      ASSAY_AUTH_FAIL_BURST: '3',
    });
    // As fast as it goes for 2 s, alternating: 5 at once plus 5/s is about 15 in all (30 if
    // each process kept its own bucket).
    let allowed = 0;
    let refused = 0;
    const until = Date.now() + 2000;
    for (let i = 0; Date.now() < until; i++) {
      const status = await ping(i % 2 === 0 ? first : second, AUTH);
      if (status === 200) allowed += 1;
      else if (status === 429) refused += 1;
      else assert.fail(`unexpected ${status}`);
    }
    assert.ok(refused > 0, 'the limit is reached');
    assert.ok(allowed >= 8 && allowed <= 20, `${allowed} allowed in 2 s across both`);

    const wrong = basic('key', 'not-the-secret');
    for (let i = 0; i < 3; i++) assert.equal(await ping(first, wrong), 401);
    // The other process reads the shared limits every 500 ms: asked without credentials (not a
    // guess, so not counted), it refuses the address once it has (within the 1.2 s this allowed).
    await waitUntil(
      'the other process refuses the address',
      async () => (await fetch(`${second.url}/v2.2/ping`)).status === 429,
      1200,
    );
    assert.equal(await ping(second, wrong), 429, 'guessing goes no faster through the other');
  });
});
