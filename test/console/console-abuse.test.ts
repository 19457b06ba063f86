import '../helpers/loopback-only.js';
import assert from 'node:assert/strict';
import { request } from 'node:http';
import { describe, test } from 'node:test';
import { MAX_FIELD_BYTES } from '../../src/http/multipart-submission.js';
import { addConsoleUser, type ConsoleClient, signIn } from '../helpers/console.js';
import { asBlob, randomContent } from '../helpers/content.js';
import { buildService, useSharedClamd } from '../helpers/service.js';

// What a hostile client of the console tries (issue 39): memory, lock-outs, limits, login CSRF.

const clamd = useSharedClamd();

const BOUNDARY = 'console-abuse-boundary';

function fieldPart(name: string, value: string | Buffer): Buffer {
  return Buffer.concat([
    Buffer.from(`--${BOUNDARY}\r\nContent-Disposition: form-data; name="${name}"\r\n\r\n`),
    Buffer.from(value),
    Buffer.from('\r\n'),
  ]);
}

/**
 * Posts a test upload whose file comes after `fields` filler fields of `fieldBytes` each, with or
 * without Content-Length; stops writing when the answer arrives. The answer's status, and how
 * many filler fields were written by then.
 */
function stuffedUpload(
  url: string,
  client: ConsoleClient,
  keyId: string,
  options: { fields: number; fieldBytes: number; chunked: boolean },
): Promise<{ status: number; written: number }> {
  const head = Buffer.concat([fieldPart('csrf', client.csrf), fieldPart('key', keyId)]);
  const filler = fieldPart('note', Buffer.alloc(options.fieldBytes, 'a'));
  const tail = Buffer.from(
    `--${BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="note.txt"\r\n` +
      `Content-Type: text/plain\r\n\r\n${randomContent(16).toString('hex')}\r\n--${BOUNDARY}--\r\n`,
  );
  const headers: Record<string, string | number> = {
    cookie: client.cookie,
    'content-type': `multipart/form-data; boundary=${BOUNDARY}`,
  };
  if (!options.chunked) {
    headers['content-length'] = head.length + filler.length * options.fields + tail.length;
  }
  return new Promise((resolve, reject) => {
    const req = request(`${url}/console/upload`, { method: 'POST', headers });
    let written = 0;
    let answered = false;
    req.on('response', (response) => {
      answered = true;
      response.resume();
      response.on('end', () => {
        // The rest of the body is never sent: the connection goes with it.
        req.destroy();
        resolve({ status: response.statusCode ?? 0, written });
      });
    });
    req.on('error', (error) => {
      if (!answered) reject(error);
    });
    req.write(head);
    const pump = () => {
      while (!answered && written < options.fields) {
        written += 1;
        if (!req.write(filler)) return void req.once('drain', pump);
      }
      if (!answered) req.end(tail);
    };
    pump();
  });
}

describe('console abuse', () => {
  test("the test upload has the API's bounds: fields past them are refused with 413 as they stream", async (t) => {
    const svc = await buildService(t, { ASSAY_CLAMD: clamd.socket });
    const client = await signIn(svc.url, await addConsoleUser(svc.store, svc.accountId));

    // 300 fields of twice the API's field size before the file (20 MB): with busboy's defaults
    // (1,000 fields of 1 MiB each, all kept until the file) this was accepted and scanned.
    const stuffing = { fields: 300, fieldBytes: 2 * MAX_FIELD_BYTES };
    const streamed = await stuffedUpload(svc.url, client, svc.keyId, {
      ...stuffing,
      chunked: true,
    });
    assert.equal(streamed.status, 413, 'without Content-Length: refused at one field too many');
    assert.ok(streamed.written < stuffing.fields, `all ${streamed.written} fields were read`);
    const declared = await stuffedUpload(svc.url, client, svc.keyId, {
      ...stuffing,
      chunked: false,
    });
    assert.equal(declared.status, 413, 'a declared length past the bounds');

    // A test upload as the console's form sends it still goes through.
    const form = new FormData();
    form.append('csrf', client.csrf);
    form.append('key', svc.keyId);
    form.append('file', asBlob(randomContent(1000)), 'note.bin');
    const fine = await fetch(`${svc.url}/console/upload`, {
      method: 'POST',
      headers: { cookie: client.cookie },
      body: form,
      redirect: 'manual',
    });
    assert.equal(fine.status, 303);
    assert.match(fine.headers.get('location') ?? '', /^\/console\/files\//);
  });

  test('a sign-in sent from another site is refused and leaves the signed-in session alone', async (t) => {
    const svc = await buildService(t, { ASSAY_CLAMD: clamd.socket });
    const victim = await signIn(svc.url, await addConsoleUser(svc.store, svc.accountId));
    const other = await svc.createAccountKey();
    const attacker = await addConsoleUser(svc.store, other.accountId);
    const host = new URL(svc.url).host;
    const crossSite: Array<Record<string, string>> = [
      { origin: 'https://evil.example', 'sec-fetch-site': 'cross-site' },
      { origin: 'https://console.evil.example', 'sec-fetch-site': 'same-site' },
      // A browser without Sec-Fetch-Site: the Origin tells.
      { origin: 'https://evil.example' },
      { origin: 'null' },
    ];
    for (const headers of crossSite) {
      const answer = await fetch(`${svc.url}/console/sign-in`, {
        method: 'POST',
        headers: { ...headers, cookie: victim.cookie },
        body: new URLSearchParams({ email: attacker.email, password: attacker.password }),
        redirect: 'manual',
      });
      assert.equal(answer.status, 403, JSON.stringify(headers));
      assert.equal(answer.headers.get('set-cookie'), null, 'no session replaced');
      assert.match(await answer.text(), /sent from another site is refused/);
    }
    const page = await victim.get('/console');
    assert.equal(page.status, 200, "the victim's own session goes on");
    assert.ok((await page.text()).includes(svc.accountId), "and shows the victim's account");

    // The console's own form, as a browser sends it.
    const sameSite: Array<Record<string, string>> = [
      { origin: `http://${host}`, 'sec-fetch-site': 'same-origin' },
      { origin: `http://${host}` },
      { 'sec-fetch-site': 'none' },
    ];
    for (const headers of sameSite) {
      const answer = await fetch(`${svc.url}/console/sign-in`, {
        method: 'POST',
        headers,
        body: new URLSearchParams({ email: attacker.email, password: attacker.password }),
        redirect: 'manual',
      });
      assert.equal(answer.status, 303, JSON.stringify(headers));
    }
  });
});
