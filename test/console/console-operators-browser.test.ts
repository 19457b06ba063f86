import '../helpers/loopback-only.js';
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { AccountService } from '../../src/accounts/account-service.js';
import { useBrowser } from '../helpers/browser.js';
import { addConsoleUser, checkPage, newPage, signInWithBrowser } from '../helpers/console.js';
import { buildService, useSharedClamd } from '../helpers/service.js';

const clamd = useSharedClamd();
const chromium = useBrowser();

describe('the operator pages in a browser', () => {
  test('an operator opens Accounts, an account, and Operations', async (t) => {
    const svc = await buildService(t, { ASSAY_CLAMD: clamd.socket });
    const accounts = new AccountService(svc.store);
    const acme = await accounts.createAccount({ name: 'Acme Corporation', balance: 1200 });
    await accounts.createKey(acme.id);
    await accounts.setAccountActive(
      (await accounts.createAccount({ name: 'Dormant Ltd' })).id,
      false,
    );
    // Something for the recent errors, and another node whose signatures differ.
    await svc.store.files.insert({
      id: 'e'.repeat(32),
      accountId: acme.id,
      apiKeyId: 'k',
      checksum: null,
      sha256: null,
      contentLength: null,
      contentType: null,
      findings: null,
      metadata: {},
      callback: null,
      error: 'the download from https://files.example/report.pdf timed out after 300 s',
      creationDate: new Date().toISOString(),
    });
    const now = Date.now();
    await svc.store.nodeHeartbeats.write({
      id: 'othernode0000001',
      host: 'worker-2.internal',
      pid: 812,
      role: 'worker',
      version: '0.1.0',
      clamdVersion: 'ClamAV 1.4.6',
      signaturesVersion: 27480,
      signaturesDate: new Date(now - 2 * 86_400_000).toISOString(),
      ownSignaturesVersion: 'sha256:0000000000000000',
      databasesVersion: 'sha256:00000000deadbeef',
      runningJobs: 2,
      startedAt: now - 7_200_000,
      lastSeenAt: now - 3_000,
    });
    const login = await addConsoleUser(svc.store, svc.accountId, { operator: true });
    const page = await newPage(chromium.browser);
    await signInWithBrowser(page, svc.url, login);

    await page.getByRole('link', { name: 'Accounts' }).click();
    await page.getByRole('link', { name: 'Dormant Ltd' }).waitFor();
    await checkPage(page, 'accounts');
    await page.getByLabel('Name, or the start of an id').fill('acme');
    await page.getByRole('button', { name: 'Search' }).click();
    await page.getByRole('link', { name: 'Acme Corporation' }).click();
    await page.getByLabel('Balance (items)').fill('500');
    await page.getByLabel('Enforce it: refuse items once it reaches 0').check();
    await page.getByRole('button', { name: 'Set the balance' }).click();
    await page.getByText('The balance is set.').waitFor();
    assert.equal((await svc.store.accounts.find(acme.id))?.balance, 500);
    assert.equal((await svc.store.accounts.find(acme.id))?.enforceBalance, true);
    await checkPage(page, 'account');
    await page.getByRole('button', { name: 'Disable the account' }).click();
    await page.getByText('The account is disabled').waitFor();
    assert.equal((await svc.store.accounts.find(acme.id))?.active, false);

    await page.getByRole('link', { name: 'Operations' }).click();
    await page.getByText('worker-2.internal').waitFor();
    await checkPage(page, 'operations');
  });
});
