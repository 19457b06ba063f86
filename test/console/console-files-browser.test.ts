import '../helpers/loopback-only.js';
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { eicar } from '../../src/engines/test-content.js';
import { useBrowser } from '../helpers/browser.js';
import { traceMessages } from '../helpers/callbacks.js';
import { addConsoleUser, checkPage, newPage, signInWithBrowser } from '../helpers/console.js';
import { upload, waitFor } from '../helpers/console-pages.js';
import { randomContent } from '../helpers/content.js';
import { startLocalServer } from '../helpers/local-server.js';
import { buildService, useSharedClamd } from '../helpers/service.js';

const clamd = useSharedClamd();
const chromium = useBrowser();

describe('the console’s files and callbacks in a browser', () => {
  test('find the EICAR file by its finding, open it and its trace, see its failed callback and retry it', async (t) => {
    const svc = await buildService(t, {
      ASSAY_CLAMD: clamd.socket,
      ASSAY_FETCH_ALLOW: '127.0.0.1/32',
      ASSAY_CALLBACK_MAX_AGE: '1',
    });
    const failing = await startLocalServer((_request, response) => {
      response.writeHead(500);
      response.end();
    });
    t.after(() => failing.close());
    await upload(svc, randomContent(2048), { 'metadata[kind]': 'clean' });
    const eicarId = await upload(
      svc,
      eicar(),
      {
        'metadata[customer]': 'c-42',
        callback: `${failing.url}/hooks/assay?token=a-long-query-string-that-must-wrap`,
      },
      'files/async',
    );
    await waitFor('the callback given up', async () => {
      const [delivery] = await svc.store.callbacks.listForFile(eicarId);
      return delivery?.state === 'failed';
    });
    const page = await newPage(chromium.browser);
    await signInWithBrowser(page, svc.url, await addConsoleUser(svc.store, svc.accountId));

    await page.getByRole('link', { name: 'Files', exact: true }).click();
    await page.getByRole('heading', { name: 'Files' }).waitFor();
    assert.equal(await page.locator('tbody tr').count(), 2);
    await checkPage(page, 'files');

    await page.getByLabel('Finding (name or part of it)').fill('eicar');
    await page.getByRole('button', { name: 'Filter' }).click();
    await page.waitForURL(/finding=eicar/);
    assert.equal(await page.locator('tbody tr').count(), 1, 'only the EICAR file');
    assert.match((await page.locator('tbody tr').textContent()) ?? '', /Flagged:/);
    await checkPage(page, 'files-filtered');

    await page.getByRole('link', { name: eicarId }).click();
    await page.getByRole('heading', { name: 'File', exact: true }).waitFor();
    assert.match((await page.locator('main dl').textContent()) ?? '', /Flagged:/);
    await page.getByRole('link', { name: 'Jump to the trace' }).click();
    assert.match(page.url(), /#trace$/);
    const trace = page.getByRole('region', { name: 'Trace' });
    for (const message of await traceMessages(svc.url, svc.auth, eicarId)) {
      await trace.getByText(message, { exact: true }).waitFor();
    }
    await checkPage(page, 'file');

    await page.getByRole('link', { name: 'Callbacks', exact: true }).click();
    await page.getByRole('heading', { name: 'Callbacks' }).waitFor();
    const row = page.locator('tbody tr').first();
    assert.match((await row.textContent()) ?? '', /Failed[\s\S]*HTTP 500/);
    await checkPage(page, 'callbacks');
    await row.getByRole('button', { name: /Retry now/ }).click();
    await page.getByText('The delivery is due now').waitFor();
    await failing.waitFor(2, 10_000);
  });
});
