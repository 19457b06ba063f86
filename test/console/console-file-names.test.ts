import '../helpers/loopback-only.js';
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { FILE_NAME_BYTES, fileNameOfUrl, keptFileName } from '../../src/domain/file-name.js';
import { addConsoleUser, signIn } from '../helpers/console.js';
import { listedIds, readable, text, waitFor } from '../helpers/console-pages.js';
import { asBlob, randomContent } from '../helpers/content.js';
import { buildService, type TestService, useSharedClamd } from '../helpers/service.js';

const clamd = useSharedClamd();

/** Uploads `content` as a file part named `name`; the answer's status and JSON text. */
async function uploadNamed(svc: TestService, name: string, route = 'files') {
  const form = new FormData();
  form.append('file', asBlob(randomContent(512)), name);
  const answer = await fetch(`${svc.url}/v2.2/${route}`, {
    method: 'POST',
    headers: { authorization: svc.auth },
    body: form,
  });
  const body = await answer.text();
  return { status: answer.status, body, id: (JSON.parse(body) as { id: string }).id };
}

describe('file names', () => {
  test('a name is kept to 255 bytes at a character’s end, without control characters', () => {
    assert.equal(keptFileName('report.pdf'), 'report.pdf');
    assert.equal(keptFileName(undefined), null);
    assert.equal(keptFileName('  \u0000\u0007 '), null);
    assert.equal(keptFileName('a\u0001b\nc\u009fd'), 'a b c d');
    assert.equal(keptFileName('x\ud800y'), 'x\ufffdy', 'a lone surrogate is no character');
    // 'é' is 2 bytes: 127 of them are 254 bytes, a 128th would be 256.
    assert.equal(keptFileName('é'.repeat(300)), 'é'.repeat(127));
    const emoji = keptFileName('😀'.repeat(100)) ?? '';
    assert.equal(emoji, '😀'.repeat(63), 'never half a character');
    assert.ok(Buffer.byteLength(keptFileName('x'.repeat(10_000)) ?? '') === FILE_NAME_BYTES);
    assert.equal(fileNameOfUrl('https://files.example/a/b/Q3%20report.pdf?x=1'), 'Q3 report.pdf');
    assert.equal(fileNameOfUrl('https://files.example/'), null);
    assert.equal(fileNameOfUrl('https://files.example/%E0%A4%A'), '%E0%A4%A');
  });

  test('the console lists and shows the name each upload path kept (escaped); the API never returns it', async (t) => {
    const svc = await buildService(t, {
      ASSAY_CLAMD: clamd.socket,
      ASSAY_FETCH_ALLOW: '127.0.0.1/32',
    });
    const client = await signIn(svc.url, await addConsoleUser(svc.store, svc.accountId));

    const markup = '<img src=x onerror=alert(1)> Q3 report & notes.pdf';
    const sync = await uploadNamed(svc, markup);
    assert.equal(sync.status, 201);
    assert.doesNotMatch(sync.body, /Q3|notes/, 'the result has no name');
    const read = await fetch(`${svc.url}/v2.2/files/${sync.id}`, {
      headers: { authorization: svc.auth },
    });
    assert.doesNotMatch(await read.text(), /Q3|notes/, 'nor has the result read later');

    const long = await uploadNamed(svc, `${'é'.repeat(300)}.txt`, 'files/async');
    assert.equal(long.status, 202);
    const fetched = await fetch(`${svc.url}/v2.2/files/fetch`, {
      method: 'POST',
      headers: { authorization: svc.auth },
      body: new URLSearchParams({ location: `${svc.url}/static/samples/language.txt` }),
    });
    assert.equal(fetched.status, 202);
    const fetchId = ((await fetched.json()) as { id: string }).id;

    // The console's own test upload.
    const form = new FormData();
    form.append('csrf', client.csrf);
    form.append('key', svc.keyId);
    form.append('file', asBlob(randomContent(256)), 'console-upload.txt');
    const consoleUpload = await fetch(`${svc.url}/console/upload`, {
      method: 'POST',
      headers: { cookie: client.cookie },
      body: form,
      redirect: 'manual',
    });
    assert.equal(consoleUpload.status, 303);
    const consoleId = /\/console\/files\/(\w+)$/.exec(
      consoleUpload.headers.get('location') ?? '',
    )?.[1];

    for (const id of [long.id, fetchId]) {
      await waitFor(`result ${id}`, async () => {
        return (await svc.store.files.findForAccount(svc.accountId, id)) !== null;
      });
    }
    const nameOf = async (id: string | undefined) =>
      (await svc.store.files.findForAccount(svc.accountId, id ?? ''))?.fileName;
    assert.equal(await nameOf(sync.id), markup);
    assert.equal(await nameOf(long.id), 'é'.repeat(127), 'cut at 255 bytes');
    assert.equal(await nameOf(fetchId), 'language.txt', "the URL's last segment");
    assert.equal(await nameOf(consoleId), 'console-upload.txt');

    const list = await text(client, '/console/files');
    assert.equal(list.status, 200);
    assert.equal(listedIds(list.page).length, 4);
    assert.ok(
      list.page.includes('&lt;img src=x onerror=alert(1)&gt; Q3 report &amp; notes.pdf'),
      'escaped',
    );
    assert.ok(!list.page.includes('<img src=x'), 'never markup');
    for (const name of ['é'.repeat(127), 'language.txt', 'console-upload.txt']) {
      assert.ok(list.page.includes(name), name);
    }
    // An operator opens any account's file (the operations page links there); a user may not.
    const own = `/console/accounts/${svc.accountId}/files/${sync.id}`;
    assert.equal((await text(client, own)).status, 404, 'operators only');
    const operator = await signIn(
      svc.url,
      await addConsoleUser(svc.store, svc.accountId, { operator: true }),
    );
    const seen = await text(operator, own);
    assert.equal(seen.status, 200);
    assert.match(readable(seen.page), /Name <img src=x onerror=alert\(1\)> Q3 report & notes\.pdf/);

    // The balance in words: nothing was set (0, not enforced), so it counts what was used.
    const used = -((await svc.store.accounts.find(svc.accountId))?.balance ?? 0);
    assert.ok(used >= 4);
    assert.match(
      readable((await text(client, '/console')).page),
      new RegExp(`Balance Used ${used} items \\(no balance set: items are not limited\\)`),
    );

    const detail = await text(client, `/console/files/${sync.id}`);
    assert.match(
      detail.page,
      /<dt>Name<\/dt><dd><span class="name">&lt;img src=x onerror=alert\(1\)&gt; Q3 report/,
    );
  });
});
