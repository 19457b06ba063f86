import '../helpers/loopback-only.js';
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { eicar } from '../../src/engines/test-content.js';
import { traceMessages } from '../helpers/callbacks.js';
import { addConsoleUser, signIn } from '../helpers/console.js';
import { listedIds, readable, rowsOf, text, upload, waitFor } from '../helpers/console-pages.js';
import { randomContent, sha1 } from '../helpers/content.js';
import { startLocalServer } from '../helpers/local-server.js';
import { buildService, useSharedClamd } from '../helpers/service.js';

const clamd = useSharedClamd();

/** Receivers on 127.0.0.1 (allowed by setting); a delivery is given up after its first failure. */
const env = () => ({
  ASSAY_CLAMD: clamd.socket,
  ASSAY_FETCH_ALLOW: '127.0.0.1/32',
  ASSAY_CALLBACK_MAX_AGE: '1',
});

describe('the console: files and callbacks', () => {
  test('an account sees its files (filtered, with findings and trace) and callbacks, never another account’s', async (t) => {
    const svc = await buildService(t, env());
    const failing = await startLocalServer((_request, response) => {
      response.writeHead(500);
      response.end();
    });
    const good = await startLocalServer((_request, response) => response.end('ok'));
    t.after(async () => {
      await failing.close();
      await good.close();
    });
    const clean = randomContent(3000);
    const cleanId = await upload(svc, clean, { 'metadata[kind]': 'clean one' });
    const eicarId = await upload(svc, eicar(), { 'metadata[customer]': 'c-42' });
    const deliveredId = await upload(svc, randomContent(500), { callback: `${good.url}/ok` });
    const asyncId = await upload(
      svc,
      randomContent(100),
      { callback: `${failing.url}/hook?token=secret-1` },
      'files/async',
    );
    await waitFor('the failed delivery', async () => {
      const [delivery] = await svc.store.callbacks.listForFile(asyncId);
      return delivery?.state === 'failed';
    });
    await good.waitFor(1);
    const other = await svc.createAccountKey();
    const otherEicar = await upload({ url: svc.url, auth: other.auth }, eicar(), {
      callback: `${failing.url}/other`,
    });
    await waitFor('the other account’s delivery', async () => {
      const [delivery] = await svc.store.callbacks.listForFile(otherEicar);
      return delivery?.state === 'failed';
    });
    // A fetch whose remote never answers: accepted, not a result yet.
    const hanging = await startLocalServer(() => new Promise(() => {}));
    t.after(() => hanging.close());
    const fetched = await fetch(`${svc.url}/v2.2/files/fetch`, {
      method: 'POST',
      headers: { authorization: svc.auth },
      body: new URLSearchParams({ location: `${hanging.url}/never` }),
    });
    assert.equal(fetched.status, 202);
    const pendingId = ((await fetched.json()) as { id: string }).id;
    const client = await signIn(svc.url, await addConsoleUser(svc.store, svc.accountId));
    const eicarFinding = (await svc.store.files.findForAccount(svc.accountId, eicarId))
      ?.findings?.[0];
    assert.ok(eicarFinding, 'EICAR has a finding');

    await t.test('no page or retry without a session', async () => {
      for (const path of ['/console/files', `/console/files/${eicarId}`, '/console/callbacks']) {
        const answer = await fetch(`${svc.url}${path}`, { redirect: 'manual' });
        assert.equal(answer.status, 303, path);
        assert.match(answer.headers.get('location') ?? '', /^\/console\/sign-in\?next=/);
      }
      const [delivery] = await svc.store.callbacks.listForFile(asyncId);
      const retry = await fetch(`${svc.url}/console/callbacks/${delivery?.id}/retry`, {
        method: 'POST',
        body: new URLSearchParams({ csrf: client.csrf }),
        redirect: 'manual',
      });
      assert.equal(retry.status, 401);
    });

    await t.test('the list: newest first, findings marked in words, no other account', async () => {
      const { status, page } = await text(client, '/console/files');
      assert.equal(status, 200);
      assert.deepEqual(
        listedIds(page),
        [asyncId, deliveredId, eicarId, cleanId],
        'no unfinished work',
      );
      const eicarRow = rowsOf(page).find((row) => row.includes(eicarId)) ?? '';
      assert.match(eicarRow, new RegExp(`Flagged: ${eicarFinding}`));
      assert.match(rowsOf(page).find((row) => row.includes(cleanId)) ?? '', /\b3,000\b.*None/);
      assert.doesNotMatch(page, new RegExp(otherEicar));
    });

    await t.test('each filter narrows the list', async () => {
      const ids = async (query: string) =>
        listedIds((await text(client, `/console/files?${query}`)).page);
      assert.deepEqual(await ids(`id=${eicarId}`), [eicarId]);
      assert.deepEqual(await ids(`checksum=${sha1(clean)}`), [cleanId]);
      assert.deepEqual(await ids(`checksum=${sha1(eicar()).toUpperCase()}`), [eicarId]);
      assert.deepEqual(
        await ids(`finding=${encodeURIComponent(eicarFinding.slice(0, 5).toLowerCase())}`),
        [eicarId],
      );
      assert.deepEqual(await ids(`finding=${encodeURIComponent(eicarFinding)}`), [eicarId]);
      assert.deepEqual(await ids('finding=EICAR'), [eicarId], 'part of a name, in any case');
      assert.deepEqual(await ids('finding=nothing-like-it'), []);
      // The text is matched within one name, quotes and all.
      assert.deepEqual(
        await ids(`finding=${encodeURIComponent(`${eicarFinding.slice(-4)}"`)}`),
        [],
      );
      // LIKE's wildcards are taken literally: '%' or '_' alone would otherwise match every finding.
      assert.deepEqual(await ids('finding=%25'), []);
      assert.deepEqual(await ids('finding=_'), []);
      assert.deepEqual(await ids('flagged=1'), [eicarId]);
      const today = new Date().toISOString().slice(0, 10);
      const tomorrow = new Date(Date.now() + 86_400_000).toISOString().slice(0, 10);
      const yesterday = new Date(Date.now() - 86_400_000).toISOString().slice(0, 10);
      assert.equal((await ids(`from=${today}&to=${today}`)).length, 4);
      assert.deepEqual(await ids(`from=${tomorrow}`), []);
      assert.deepEqual(await ids(`to=${yesterday}`), []);
      assert.deepEqual(await ids(`flagged=1&from=${today}&checksum=${sha1(clean)}`), []);
      // Another account's id, checksum or finding finds nothing here.
      assert.deepEqual(await ids(`id=${otherEicar}`), []);
      for (const bad of [
        'checksum=xyz',
        `finding=${'a'.repeat(101)}`,
        'from=2024-02-30',
        'id=a%27b',
      ]) {
        const answer = await text(client, `/console/files?${bad}`);
        assert.equal(answer.status, 400, bad);
        assert.match(answer.page, /role="alert"/, bad);
      }
      assert.equal((await text(client, '/console/files?before=not-a-cursor')).status, 400);
    });

    await t.test('the detail page: metadata, findings, checksum and the API’s trace', async () => {
      const { status, page } = await text(client, `/console/files/${eicarId}`);
      assert.equal(status, 200);
      const shown = readable(page);
      for (const expected of [
        eicarId,
        `Flagged: ${eicarFinding}`,
        sha1(eicar()),
        'Length (bytes) 68',
      ]) {
        assert.ok(shown.includes(expected), `shows ${expected}`);
      }
      assert.match(shown, /customer\s*:\s*c-42/, 'its metadata');
      const trace = await traceMessages(svc.url, svc.auth, eicarId);
      assert.ok(trace.length >= 2, 'the API has a trace');
      for (const message of trace) assert.ok(shown.includes(message), `trace line: ${message}`);

      const pending = await text(client, `/console/files/${pendingId}`);
      assert.equal(pending.status, 200, 'unfinished work has a page');
      assert.match(readable(pending.page), /still being processed.*received: fetch of/);

      const asyncPage = readable((await text(client, `/console/files/${asyncId}`)).page);
      assert.ok(asyncPage.includes(`${failing.url}/hook?token=secret-1`), 'the callback URL');
      assert.match(
        asyncPage,
        /Failed created [0-9: -]+ given up [0-9: -]+ 1 HTTP 500/,
        'its delivery, attempts and last error',
      );
    });

    await t.test('another account’s file: 404 on its page, as an unknown id', async () => {
      for (const id of [otherEicar, 'f'.repeat(32), 'not an id']) {
        const answer = await text(client, `/console/files/${encodeURIComponent(id)}`);
        assert.equal(answer.status, 404, id);
        assert.doesNotMatch(answer.page, /Flagged/);
      }
    });

    const [failed] = await svc.store.callbacks.listForFile(asyncId);
    const [delivered] = await svc.store.callbacks.listForFile(deliveredId);
    const [othersDelivery] = await svc.store.callbacks.listForFile(otherEicar);
    assert.ok(failed && delivered && othersDelivery);

    await t.test('callbacks: failed first, with attempts, last error and destination', async () => {
      const { status, page } = await text(client, '/console/callbacks');
      assert.equal(status, 200);
      const rows = rowsOf(page);
      assert.equal(rows.length, 2, 'the account’s two deliveries, not the other account’s');
      assert.match(
        rows[0] ?? '',
        new RegExp(`^Failed .*${asyncId} POST ${failing.url}/hook\\?token=secret-1 1 HTTP 500`),
      );
      assert.match(rows[0] ?? '', /Retry now/);
      assert.match(rows[1] ?? '', new RegExp(`^Delivered .*${deliveredId} POST ${good.url}/ok 1$`));
      assert.doesNotMatch(rows[1] ?? '', /Retry now/, 'nothing to retry once delivered');
      assert.doesNotMatch(page, new RegExp(othersDelivery.id));
    });

    await t.test(
      'retry now: refused without the CSRF token; with it, attempted again',
      async () => {
        const before = failing.requests.length;
        const path = `/console/callbacks/${failed.id}/retry`;
        assert.equal((await client.post(path, {}, null)).status, 403, 'no token');
        assert.equal((await client.post(path, {}, 'x'.repeat(43))).status, 403, 'a wrong token');
        await sleep(1500);
        assert.equal(failing.requests.length, before, 'no attempt without the token');
        assert.equal((await svc.store.callbacks.find(failed.id))?.state, 'failed');

        const answer = await client.post(path);
        assert.equal(answer.status, 303);
        assert.equal(answer.headers.get('location'), '/console/callbacks?done=retried');
        const requests = await failing.waitFor(before + 1, 10_000);
        assert.equal(requests.at(-1)?.headers['x-assay-delivery'], failed.id);
        assert.equal(requests.at(-1)?.headers['x-assay-attempt'], '2');
        await waitFor('the second failure', async () => {
          const now = await svc.store.callbacks.find(failed.id);
          return now?.state === 'failed' && now.attempts === 2;
        });
        const trace = await traceMessages(svc.url, svc.auth, asyncId);
        assert.ok(trace.some((message) => /retry requested in the console/.test(message)));
        assert.doesNotMatch(trace.join('\n'), /secret-1/, 'no query string in the trace');

        assert.equal((await client.post(`/console/callbacks/${delivered.id}/retry`)).status, 409);
      },
    );

    await t.test(
      'another account’s delivery cannot be retried (404), nor an unknown one',
      async () => {
        const before = failing.requests.length;
        for (const id of [othersDelivery.id, 'f'.repeat(32)]) {
          assert.equal((await client.post(`/console/callbacks/${id}/retry`)).status, 404, id);
        }
        await sleep(1500);
        assert.equal(failing.requests.length, before);
        assert.equal((await svc.store.callbacks.find(othersDelivery.id))?.attempts, 1);
      },
    );
  });

  test('retry now of a delivery waiting for its next attempt tries it at once', async (t) => {
    // The next attempt after a failure is 5 to 10 minutes away.
    const svc = await buildService(t, {
      ...env(),
      ASSAY_CALLBACK_MAX_AGE: '86400',
      ASSAY_CALLBACK_RETRY_BASE_MS: '600000',
    });
    const failing = await startLocalServer((_request, response) => {
      response.writeHead(503);
      response.end();
    });
    t.after(() => failing.close());
    const id = await upload(
      svc,
      randomContent(100),
      { callback: `${failing.url}/wait` },
      'files/async',
    );
    await failing.waitFor(1);
    await waitFor('the failure recorded', async () => {
      const [delivery] = await svc.store.callbacks.listForFile(id);
      return delivery?.lastError === 'HTTP 503';
    });
    const [waiting] = await svc.store.callbacks.listForFile(id);
    assert.ok(waiting && waiting.state === 'pending');
    assert.ok(Date.parse(waiting.nextAttemptAt) - Date.now() > 60_000, 'waits minutes');

    const client = await signIn(svc.url, await addConsoleUser(svc.store, svc.accountId));
    const [row] = rowsOf((await text(client, '/console/callbacks')).page);
    assert.match(
      row ?? '',
      new RegExp(
        `^Pending created .* next attempt .*${id} POST ${failing.url}/wait 1 HTTP 503 Retry now$`,
      ),
    );
    assert.equal((await client.post(`/console/callbacks/${waiting.id}/retry`)).status, 303);
    const requests = await failing.waitFor(2, 10_000);
    assert.equal(requests[1]?.headers['x-assay-attempt'], '2');
    await waitFor('the second failure recorded', async () => {
      const now = await svc.store.callbacks.find(waiting.id);
      return now?.attempts === 2 && Date.parse(now.nextAttemptAt) - Date.now() > 60_000;
    });
    await sleep(1500);
    assert.equal(failing.requests.length, 2, 'then it waits again');
    assert.equal((await svc.store.callbacks.find(waiting.id))?.state, 'pending');
  });
});
