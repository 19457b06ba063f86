import '../helpers/loopback-only.js';
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { useBrowser } from '../helpers/browser.js';
import { addConsoleUser, checkPage, newPage, signInWithBrowser } from '../helpers/console.js';
import { basic, buildService, useSharedClamd } from '../helpers/service.js';

const clamd = useSharedClamd();
const chromium = useBrowser();

describe('the console in a browser', () => {
  test('sign in, create a key, use it on the API, disable it and see the API refuse it, sign out', async (t) => {
    const svc = await buildService(t, { ASSAY_CLAMD: clamd.socket });
    const login = await addConsoleUser(svc.store, svc.accountId);
    const page = await newPage(chromium.browser);

    await page.goto(`${svc.url}/console`);
    assert.match(page.url(), /\/console\/sign-in\?next=/, 'no page without a session');
    await checkPage(page, 'sign-in');
    await signInWithBrowser(page, svc.url, login);
    await checkPage(page, 'overview');

    await page.getByRole('link', { name: 'API keys' }).click();
    await page.getByLabel('Tags (comma-separated, optional)').fill('browser, test');
    await page.getByRole('button', { name: 'Create key' }).click();
    const secret = (await page.locator('#new-secret').textContent()) ?? '';
    const keyId =
      /Key (\w+) created/.exec((await page.locator('.notice').textContent()) ?? '')?.[1] ?? '';
    assert.match(keyId, /^[0-9a-f]{32}$/);
    await checkPage(page, 'keys');
    const ping = async () =>
      (await fetch(`${svc.url}/v2.2/ping`, { headers: { authorization: basic(keyId, secret) } }))
        .status;
    assert.equal(await ping(), 200, 'the new key works on the API');

    await page.getByRole('link', { name: keyId, exact: true }).click();
    await checkPage(page, 'key');
    await page.getByRole('link', { name: 'Back to the keys' }).click();
    // Disabling asks first: the key works until the second step.
    await page.getByRole('link', { name: `Disable key ${keyId}` }).click();
    await page.getByRole('heading', { name: `Disable key ${keyId}?` }).waitFor();
    await checkPage(page, 'key-disable');
    assert.equal(await ping(), 200, 'asking disables nothing');
    await page.getByRole('link', { name: 'Cancel' }).click();
    await page.getByRole('heading', { name: 'API keys' }).waitFor();
    assert.equal(await ping(), 200, 'cancelled: the key still works');
    await page.getByRole('link', { name: `Disable key ${keyId}` }).click();
    await page.getByRole('button', { name: 'Disable the key' }).click();
    await page.getByText('The key is disabled').waitFor();
    assert.equal(await ping(), 401, 'the API refuses the disabled key');

    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.waitForURL(/\/console\/sign-in/);
    await page.goto(`${svc.url}/console/keys`);
    assert.match(page.url(), /\/console\/sign-in/, 'signed out: no page');
  });
});
