import '../helpers/loopback-only.js';
import assert from 'node:assert/strict';
import { request } from 'node:http';
import { describe, test } from 'node:test';
import { ConsoleAccess } from '../../src/accounts/console-access.js';
import { loadConfig } from '../../src/config.js';
import { MAX_FIELD_BYTES } from '../../src/http/multipart-submission.js';
import { assayCli } from '../helpers/cli.js';
import {
  addConsoleUser,
  type ConsoleClient,
  mainText,
  signIn,
  signInAnswer,
} from '../helpers/console.js';
import { asBlob, randomContent } from '../helpers/content.js';
import { buildService, credentialsRefreshed, useSharedClamd } from '../helpers/service.js';

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

  test("a stranger who empties a user's sign-in bucket keeps out strangers, not the owner's browser", async (t) => {
    const svc = await buildService(t, {
      ASSAY_CLAMD: clamd.socket,
      ASSAY_TRUST_PROXY: '127.0.0.1/32',
    });
    const login = await addConsoleUser(svc.store, svc.accountId);
    const other = await addConsoleUser(svc.store, svc.accountId);
    const from = (address: string, cookie?: string) => ({
      'x-forwarded-for': address,
      ...(cookie === undefined ? {} : { cookie }),
    });
    // The owner signed in once with this browser: it keeps a device cookie for the sign-in form.
    const first = await signInAnswer(svc.url, login.email, login.password, from('10.1.0.1'));
    assert.equal(first.status, 303);
    const set = first.headers.getSetCookie().find((c) => c.startsWith('assay_console_device='));
    assert.ok(set !== undefined, 'a device cookie is set');
    assert.match(set, /; Path=\/console\/sign-in/);
    assert.match(set, /; HttpOnly/);
    assert.match(set, /; SameSite=Strict/);
    const device = set.split(';')[0] ?? '';
    const otherDevice = (
      (await signInAnswer(svc.url, other.email, other.password, from('10.1.0.2'))).headers
        .getSetCookie()
        .find((c) => c.startsWith('assay_console_device=')) ?? ''
    ).split(';')[0];

    // Wrong passwords from many addresses, one each: the user's bucket runs dry.
    const guesses: number[] = [];
    for (let attempt = 0; attempt < 6; attempt++) {
      const answer = await signInAnswer(
        svc.url,
        login.email,
        'a wrong password',
        from(`10.2.0.${attempt + 1}`),
      );
      guesses.push(answer.status);
    }
    assert.deepEqual(guesses.slice(-2), [429, 429]);
    // Guessing stays bounded: a browser without the user's device cookie is held, right password
    // or not, whatever cookie it shows instead.
    for (const cookie of [
      undefined,
      otherDevice,
      'assay_console_device=1.AAAAAAAAAAAAAAAAAAAAAA.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA',
    ]) {
      const held = await signInAnswer(
        svc.url,
        login.email,
        login.password,
        from('10.3.0.1', cookie),
      );
      assert.equal(held.status, 429, `cookie ${cookie}`);
      assert.match(mainText(await held.text()), /Too many sign-in attempts/);
    }
    // The owner's browser signs in, from an address never seen before too.
    const owner = await signInAnswer(
      svc.url,
      login.email,
      login.password,
      from('10.4.0.1', device),
    );
    assert.equal(owner.status, 303, "the owner's browser is not held by the user's bucket");
    assert.match(owner.headers.get('set-cookie') ?? '', /assay_console=[^;]+/);
    const wrong = await signInAnswer(
      svc.url,
      login.email,
      'a wrong password',
      from('10.4.0.1', device),
    );
    assert.equal(wrong.status, 401, 'a wrong password from it is still wrong');
    // Guesses with the owner's cookie (a stolen cookie jar) are bounded by a bucket of their own.
    const withCookie: number[] = [];
    for (let attempt = 0; attempt < 4; attempt++) {
      const answer = await signInAnswer(
        svc.url,
        login.email,
        'a wrong password',
        from(`10.5.0.${attempt + 1}`, device),
      );
      withCookie.push(answer.status);
    }
    assert.deepEqual(withCookie, [401, 401, 401, 429]);

    // A new password ends the browsers' device tokens with the sessions.
    await new ConsoleAccess(svc.store, loadConfig({}).console).resetPassword(
      login.email,
      'the owner changed it',
    );
    const after = await signInAnswer(
      svc.url,
      login.email,
      'the owner changed it',
      from('10.4.0.1', device),
    );
    assert.equal(after.status, 429, 'the old device token is gone with the old password');
  });

  test('sign-in attempts from one IPv6 /64 share one bucket, whatever the interface ids', async (t) => {
    const svc = await buildService(t, {
      ASSAY_CLAMD: clamd.socket,
      ASSAY_TRUST_PROXY: '127.0.0.1/32',
    });
    // At once, so the bucket's refill (one every 6 s) cannot let more through on a slow machine:
    // each attempt takes its token before its password hash.
    const statuses = await Promise.all(
      Array.from({ length: 20 }, async (_, attempt) => {
        const answer = await signInAnswer(svc.url, `nobody${attempt}@example.com`, 'a guess', {
          'x-forwarded-for': `2001:db8:5:6:${(attempt + 1).toString(16)}::${attempt + 7}`,
        });
        return answer.status;
      }),
    );
    const refused = statuses.filter((status) => status === 429).length;
    assert.ok(refused >= 8, `${refused} of 20 refused: ${statuses.join(' ')}`);
    assert.equal(refused + statuses.filter((status) => status === 401).length, 20);
    const nextDoor = await signInAnswer(svc.url, 'nobody@example.com', 'a guess', {
      'x-forwarded-for': '2001:db8:5:7::1',
    });
    assert.equal(nextDoor.status, 401, 'another /64 is another client');
  });

  test('a rate limit the operator set is a ceiling: the console shows it and can lower it, never raise it', async (t) => {
    const svc = await buildService(t, { ASSAY_CLAMD: clamd.socket });
    const operator = assayCli(svc.dataDir, [
      'admin',
      'key',
      'update',
      svc.keyId,
      '--rate-limit',
      '5',
    ]);
    assert.equal(operator.status, 0, operator.stderr);
    await credentialsRefreshed(svc);
    const client = await signIn(svc.url, await addConsoleUser(svc.store, svc.accountId));
    const save = (rate: string) =>
      client.post(`/console/keys/${svc.keyId}/update`, { category: 'MALWARE', rate });
    for (const rate of ['0', '6', '1000000']) {
      const refused = await save(rate);
      assert.equal(refused.status, 400, `rate ${rate}`);
      assert.match(
        mainText(await refused.text()),
        /at most 5 requests per second: that limit is set by the service's operator/,
      );
    }
    // The key's page says why.
    const keyPage = mainText(await (await client.get(`/console/keys/${svc.keyId}`)).text());
    assert.match(
      keyPage,
      /Ceiling 5 requests per second, 10 at once \(this key's, set by the service's operator/,
    );
    assert.match(keyPage, /at most 5\)/);
    await credentialsRefreshed(svc);
    // The key's pings are still held at the operator's 5/s (a burst of 10).
    const pings = await Promise.all(
      Array.from({ length: 60 }, async () => {
        const answer = await fetch(`${svc.url}/v2.2/ping`, {
          headers: { authorization: svc.auth },
        });
        return answer.status;
      }),
    );
    assert.ok(pings.filter((status) => status === 429).length > 0, `no 429: ${pings.join(' ')}`);

    // Lower is the account's to choose; it stays under a ceiling raised later.
    const lowered = await save('1');
    assert.equal(lowered.status, 303);
    const raised = assayCli(svc.dataDir, [
      'admin',
      'key',
      'update',
      svc.keyId,
      '--rate-limit',
      '50',
    ]);
    assert.equal(raised.status, 0, raised.stderr);
    await credentialsRefreshed(svc);
    const ping = await fetch(`${svc.url}/v2.2/ping`, { headers: { authorization: svc.auth } });
    assert.equal(ping.headers.get('x-ratelimit-limit'), '2', "the account's own: 1/s, 2 at once");
    const lowerPage = mainText(await (await client.get(`/console/keys/${svc.keyId}`)).text());
    assert.match(lowerPage, /Rate limit 1 requests per second, 2 at once/);
    assert.match(lowerPage, /Ceiling 50 requests per second, 100 at once/);
  });
});
