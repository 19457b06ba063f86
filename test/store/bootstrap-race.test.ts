import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { rmSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { test } from 'node:test';
import { loadConfig } from '../../src/config.js';
import { openStore } from '../../src/store/open-store.js';
import { nodeArgsOf } from '../helpers/entry.js';
import { tempDir } from '../helpers/service.js';
import { prepareStore, TEST_POOL_ENV } from '../helpers/test-database.js';

test('processes creating the bootstrap key at once: one creates it, the others find it, one account', async (t) => {
  const dataDir = tempDir();
  t.after(() => rmSync(dataDir, { recursive: true, force: true }));
  const env = {
    ...process.env,
    ASSAY_DATA_DIR: dataDir,
    ...TEST_POOL_ENV,
    ...(await prepareStore(dataDir)),
  };
  // Migrated once first; then three processes, each with its store open, race on the key.
  const store = await openStore(loadConfig(env));
  t.after(() => store.close());
  const children = [1, 2, 3].map(() => {
    const child = spawn(process.execPath, nodeArgsOf('test/helpers/bootstrap-child.ts'), {
      env,
      stdio: ['pipe', 'pipe', 'inherit'],
    });
    // Every line kept from the start: a child may print before the test asks for its line.
    const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
    const next = async () => String((await lines.next()).value);
    return { child, next };
  });
  for (const { next } of children) assert.equal(await next(), 'ready');
  const outcomes = children.map(({ next }) => next());
  for (const { child } of children) child.stdin.write('go\n');
  const settled = (await Promise.all(outcomes)).sort();
  assert.deepEqual(settled, ['created', 'exists', 'exists']);
  assert.equal((await store.accounts.list()).length, 1, 'no account left without its key');
});
