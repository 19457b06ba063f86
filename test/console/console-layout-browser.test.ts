import '../helpers/loopback-only.js';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { describe, test } from 'node:test';
import { AccountService } from '../../src/accounts/account-service.js';
import { newTokenId } from '../../src/accounts/credentials.js';
import type { StoredFile } from '../../src/domain/records.js';
import { useBrowser } from '../helpers/browser.js';
import { addConsoleUser, layoutAtWidths, newPage, signInWithBrowser } from '../helpers/console.js';
import { upload } from '../helpers/console-pages.js';
import { randomContent, uploadForm } from '../helpers/content.js';
import { buildService, useSharedClamd } from '../helpers/service.js';

const clamd = useSharedClamd();
const chromium = useBrowser();

const hex = (bytes: number) => randomBytes(bytes).toString('hex');

/** A callback URL as clients send them: a long path and a signed query, no space to wrap at. */
const LONG_URL = `https://hooks.customer-platform.example.com/api/v3/integrations/assay/callbacks/${hex(16)}/results?signature=${hex(64)}&expires=1893456000&tenant=acme-corporation-emea-production`;
/** An error as an engine or a remote host words it, with a URL and a path in it. */
const LONG_ERROR = `the download from ${LONG_URL} failed after 3 attempts: connect ETIMEDOUT 203.0.113.45:443 (the remote host did not answer within 30 s); /var/lib/assay/spool/${hex(20)}/content.partial was removed`;
/** A file name at the bound (255 bytes), one word. */
const LONG_NAME = `${`Quarterly-financial-report_${'Q3-2024-final-version-reviewed-by-legal-and-compliance_'.repeat(4)}`.slice(
  0,
  251,
)}.pdf`;

describe('the console’s layout with realistic data', () => {
  test('every console page and /docs fit 390 and 1280 px: nothing wider than the screen, cut off or hidden', async (t) => {
    const svc = await buildService(t, { ASSAY_CLAMD: clamd.socket });
    const accounts = new AccountService(svc.store);
    const login = await addConsoleUser(svc.store, svc.accountId, {
      operator: true,
      email: `content-moderation.operations-team.${hex(4)}@assay-layout-testing.customer-platform.example.com`,
    });

    // Keys with many long tags and rate limits; one disabled.
    const tags = Array.from({ length: 10 }, (_, i) => `customer-portal-production-eu-west-${i}`);
    const made: string[] = [];
    for (let i = 0; i < 4; i++) {
      made.push((await accounts.createKey(svc.accountId, { tags })).key.id);
    }
    await accounts.updateAccountKey(svc.accountId, made[0] ?? '', {
      accountRateLimit: { rate: 12.5, burst: 25 },
    });
    await accounts.setAccountKeyActive(svc.accountId, made[1] ?? '', false);
    // Many tokens.
    const now = Date.now();
    for (let i = 0; i < 60; i++) {
      await svc.store.tokens.insert({
        id: newTokenId(),
        accountId: svc.accountId,
        apiKeyId: made[i % 2 === 0 ? 0 : 2] ?? '',
        creationDate: new Date(now).toISOString(),
        expirationDate: new Date(now + 3_600_000).toISOString(),
      });
    }

    // Real results with a long file name; the second reuses the first's verdict (its trace names it).
    const content = randomContent(4096);
    const named = async () => {
      const form = uploadForm(content, {
        callback: LONG_URL,
        'metadata[customer-reference]': `order-${hex(24)}`,
      });
      form.set('file', new Blob([content as Uint8Array<ArrayBuffer>]), LONG_NAME);
      const answer = await fetch(`${svc.url}/v2.2/files`, {
        method: 'POST',
        headers: { authorization: svc.auth },
        body: form,
      });
      assert.equal(answer.status, 201);
      return ((await answer.json()) as { id: string }).id;
    };
    const first = await named();
    const reused = await named();
    // Results that ended in a long error, with many findings, and their failed callbacks.
    const file = (overrides: Partial<StoredFile>): StoredFile => ({
      id: hex(16),
      accountId: svc.accountId,
      apiKeyId: svc.keyId,
      checksum: hex(20),
      sha256: hex(32),
      contentLength: 123_456_789,
      contentType: 'application/vnd.openxmlformats-officedocument.wordprocessingml.document',
      findings: [],
      metadata: {},
      callback: LONG_URL,
      error: null,
      creationDate: new Date().toISOString(),
      ...overrides,
    });
    const failed = file({
      findings: null,
      checksum: null,
      sha256: null,
      contentLength: null,
      contentType: null,
      error: LONG_ERROR,
    });
    const flagged = file({
      findings: Array.from({ length: 8 }, (_, i) => `Win.Trojan.Agent-${1000 + i}-${hex(4)}`),
    });
    for (const one of [failed, flagged]) await svc.store.files.insert(one);
    for (const [index, one] of [failed, flagged].entries()) {
      await svc.store.callbacks.enqueue({
        id: hex(16),
        fileId: one.id,
        accountId: svc.accountId,
        url: LONG_URL,
        destination: 'https://hooks.customer-platform.example.com:443',
        method: 'POST',
        body: '{}',
        contentType: 'application/json',
        state: index === 0 ? 'failed' : 'pending',
        attempts: 17,
        nextAttemptAt: new Date(now + 600_000).toISOString(),
        lastError: LONG_ERROR,
        creationDate: new Date().toISOString(),
        finishedDate: index === 0 ? new Date().toISOString() : null,
      });
    }
    // A job still waiting (its page says so).
    const pendingId = await upload(svc, randomContent(64), {}, 'files/async');

    // Operator pages: accounts with long names, a node with a long host name.
    const other = await accounts.createAccount({
      name: `Acme Corporation International Holdings — Content Moderation Division (EMEA) ${hex(8)}`,
      billingEmail: `accounts-payable.invoices.${hex(6)}@acme-corporation-international.example.com`,
      balance: 1_000_000,
    });
    for (let i = 0; i < 5; i++) await accounts.createAccount({ name: `Customer ${i} ${hex(12)}` });
    await addConsoleUser(svc.store, other.id, {
      email: `a-very-long-mailbox-name.for.the-content-team.${hex(8)}@acme-corporation-international.example.com`,
    });
    await svc.store.nodeHeartbeats.write({
      id: hex(8),
      host: `assay-worker-7f9c2d1e4b-xk2lp.assay-workers.production.svc.cluster.local`,
      pid: 812_345,
      role: 'worker',
      version: '0.1.0',
      clamdVersion: 'ClamAV 1.4.6',
      signaturesVersion: 27_480,
      signaturesDate: new Date(now - 2 * 86_400_000).toISOString(),
      ownSignaturesVersion: `sha256:${hex(32)}`,
      databasesVersion: `sha256:${hex(32)}`,
      runningJobs: 2,
      startedAt: now - 7_200_000,
      lastSeenAt: now - 3_000,
    });

    const page = await newPage(chromium.browser);
    const problems: string[] = [];
    // Nothing a page asks for is missing (a favicon it does not link is asked for at /favicon.ico).
    const missing: string[] = [];
    page.on('response', (response) => {
      if (response.status() >= 400) missing.push(`${response.status()} ${response.url()}`);
    });
    const visit = async (name: string, path: string) => {
      const answer = await page.goto(`${svc.url}${path}`);
      assert.equal(answer?.status(), 200, path);
      const icon = (await page.evaluate(
        `document.querySelector('link[rel="icon"]')?.getAttribute('href') ?? null`,
      )) as string | null;
      assert.ok(icon !== null, `${path} links its icon`);
      const served = await fetch(new URL(icon, svc.url));
      assert.equal(served.status, 200, `${path}: its icon`);
      assert.equal(served.headers.get('content-type'), 'image/svg+xml');
      problems.push(...(await layoutAtWidths(page, `layout-${name}`)));
    };
    await visit('sign-in', '/console/sign-in');
    await visit('docs', '/docs');
    await signInWithBrowser(page, svc.url, login);
    await visit('overview', '/console');
    await visit('keys', '/console/keys');
    await visit('key', `/console/keys/${made[0]}`);
    await visit('upload', '/console/upload');
    await visit('files', '/console/files');
    await visit('file', `/console/files/${reused}`);
    const trace = page.getByRole('region', { name: 'Trace' });
    assert.equal(
      await trace.getByRole('link', { name: first, exact: true }).getAttribute('href'),
      `/console/files/${first}`,
      'the item whose verdict was reused is a link',
    );
    await visit('file-failed', `/console/files/${failed.id}`);
    await visit('file-flagged', `/console/files/${flagged.id}`);
    await visit('file-pending', `/console/files/${pendingId}`);
    await visit('callbacks', '/console/callbacks');
    await visit('accounts', '/console/accounts');
    await visit('account', `/console/accounts/${other.id}`);
    await visit('operations', '/console/operations');
    const errors = page.getByRole('region', { name: 'Recent result errors' });
    assert.equal(
      await errors.getByRole('link', { name: failed.id, exact: true }).getAttribute('href'),
      `/console/accounts/${svc.accountId}/files/${failed.id}`,
      'a result in error opens in the operator’s view of its account',
    );
    await visit('key-disable', `/console/keys/${made[0]}/disable`);
    await visit('operator-file', `/console/accounts/${svc.accountId}/files/${failed.id}`);
    assert.deepEqual(problems, []);
    assert.deepEqual(missing, []);
  });
});
