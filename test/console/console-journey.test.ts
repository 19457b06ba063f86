import '../helpers/loopback-only.js';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { eicar } from '../../src/engines/test-content.js';
import { useBrowser } from '../helpers/browser.js';
import { addConsoleUser, checkPage, newPage, signInWithBrowser } from '../helpers/console.js';
import { uploadForm } from '../helpers/content.js';
import { basic, buildService, tempDir, useSharedClamd } from '../helpers/service.js';

const clamd = useSharedClamd();
const chromium = useBrowser();

// Issue 27's journey: sign in, create a key, use it on the API, find the file and its findings,
// open its trace, revoke the key and see the API refuse it, sign out; and the same by keyboard.
describe('the console, end to end in a browser', () => {
  test('a key made in the console scans on the API; its file, findings and trace are found; revoked, the API refuses it', async (t) => {
    const svc = await buildService(t, { ASSAY_CLAMD: clamd.socket });
    const login = await addConsoleUser(svc.store, svc.accountId);
    const page = await newPage(chromium.browser);
    await signInWithBrowser(page, svc.url, login);

    await page.getByRole('link', { name: 'API keys' }).click();
    await page.getByRole('button', { name: 'Create key' }).click();
    const secret = (await page.locator('#new-secret').textContent()) ?? '';
    const keyId =
      /Key (\w+) created/.exec((await page.locator('.notice').textContent()) ?? '')?.[1] ?? '';
    const auth = basic(keyId, secret);

    const upload = await fetch(`${svc.url}/v2.2/files`, {
      method: 'POST',
      headers: { authorization: auth },
      body: uploadForm(eicar(), { 'metadata[order]': 'journey-42' }),
    });
    assert.equal(upload.status, 201);
    const { id } = (await upload.json()) as { id: string };

    await page.getByRole('link', { name: 'Files' }).click();
    await page.getByLabel('Finding').fill('content.malicious.eicar');
    await page.getByRole('button', { name: 'Filter' }).click();
    await page.getByRole('link', { name: id }).click();
    const detail = (await page.locator('main').textContent()) ?? '';
    assert.match(detail, /content\.malicious\.eicar-test-signature/);
    assert.match(detail, /journey-42/);
    assert.match(detail, /engine clamav \(MALWARE\): found/, 'the trace is on the page');
    await checkPage(page, 'journey-file');

    await page.getByRole('link', { name: 'API keys' }).click();
    await page.getByRole('link', { name: `Disable key ${keyId}` }).click();
    await page.getByRole('button', { name: 'Disable the key' }).click();
    await page.getByText('The key is disabled').waitFor();
    const refused = await fetch(`${svc.url}/v2.2/ping`, { headers: { authorization: auth } });
    assert.equal(refused.status, 401, 'the API refuses the revoked key');

    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.waitForURL(/\/console\/sign-in/);
  });

  test('by keyboard alone: sign in, reach the test upload, scan a file and see its result', async (t) => {
    const svc = await buildService(t, { ASSAY_CLAMD: clamd.socket });
    const login = await addConsoleUser(svc.store, svc.accountId);
    const dir = tempDir('assay-console-upload-');
    const file = join(dir, 'notes.txt');
    writeFileSync(file, 'A plain note for the test upload.\n');
    const page = await newPage(chromium.browser);
    await page.goto(`${svc.url}/console/sign-in`);
    // Tab from the top: the skip link first, then (past the brand's link) the form's fields.
    await page.keyboard.press('Tab');
    assert.equal(await page.evaluate(() => document.activeElement?.textContent), 'Skip to content');
    for (let presses = 0; presses < 3; presses++) {
      await page.keyboard.press('Tab');
      if ((await page.evaluate(() => document.activeElement?.id)) === 'email') break;
    }
    assert.equal(await page.evaluate(() => document.activeElement?.id), 'email');
    await page.keyboard.type(login.email);
    await page.keyboard.press('Tab');
    await page.keyboard.type(login.password);
    await page.keyboard.press('Enter');
    await page.waitForURL(`${svc.url}/console`);

    // Through the navigation to the test upload, by Tab and Enter.
    for (let presses = 0; presses < 20; presses++) {
      await page.keyboard.press('Tab');
      if ((await page.evaluate(() => document.activeElement?.textContent)) === 'Test upload') break;
    }
    await page.keyboard.press('Enter');
    await page.waitForURL(`${svc.url}/console/upload`);
    // The account's key (made outside the console) is offered.
    assert.equal(await page.getByLabel('API key').inputValue(), svc.keyId);
    await checkPage(page, 'upload');
    await page.getByLabel('File').setInputFiles(file);
    await page.getByLabel('File').focus();
    await page.keyboard.press('Tab');
    await page.keyboard.press('Enter');
    await page.waitForURL(/\/console\/files\/[0-9a-f]{32}$/);
    const result = (await page.locator('main').textContent()) ?? '';
    assert.match(result, /text\/plain/);
    assert.match(result, /no findings|clean/i);
  });
});
