import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { eicar } from '../../src/engines/test-content.js';
import { pollResult } from '../helpers/client.js';
import { uploadForm } from '../helpers/content.js';
import { type LocalServer, startLocalServer } from '../helpers/local-server.js';
import { guardRefused } from '../helpers/loopback-only.js';
import { buildService, useSharedClamd } from '../helpers/service.js';

const clamd = useSharedClamd();
let content: LocalServer;
before(async () => {
  // A stand-in for the internet: serves EICAR, 404s, a redirect to a private address, a stall.
  content = await startLocalServer(async (request, response) => {
    if (request.url === '/eicar.txt') return void response.end(eicar());
    if (request.url === '/clean.txt') return void response.end('nothing to see here');
    if (request.url === '/to-metadata') {
      response.writeHead(302, { location: 'http://169.254.169.254/latest/meta-data/' });
      return void response.end();
    }
    if (request.url === '/to-private') {
      response.writeHead(301, { location: 'http://10.0.0.1/secret' });
      return void response.end();
    }
    if (request.url === '/stall') {
      await sleep(3_000);
      return void response.end('late');
    }
    response.writeHead(404);
    response.end('not here');
  });
});
after(async () => {
  await content.close();
  assert.deepEqual(
    guardRefused,
    [],
    'Assay itself refused every private address before connecting',
  );
});

/** The local server is reachable only because the tests allow 127.0.0.1 by setting. */
const allowLocal = () => ({ ASSAY_CLAMD: clamd.socket, ASSAY_FETCH_ALLOW: '127.0.0.1/32' });

async function submitFetch(url: string, auth: string, fields: Record<string, string>) {
  const response = await fetch(`${url}/v2.2/files/fetch`, {
    method: 'POST',
    headers: { authorization: auth, 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams(fields).toString(),
  });
  return { response, body: (await response.json()) as Record<string, unknown> };
}

describe('POST /files/fetch', () => {
  test('fetching EICAR from an allowed local server gives the EICAR finding', async (t) => {
    const svc = await buildService(t, allowLocal());
    const { response, body } = await submitFetch(svc.url, svc.auth, {
      location: `${content.url}/eicar.txt`,
      'metadata[source]': 'web',
    });
    assert.equal(response.status, 202);
    assert.equal(response.headers.get('location'), `${svc.url}/v2.2/files/${body.id}`);
    const result = await pollResult(svc.url, svc.auth, String(body.id));
    assert.deepEqual(result.findings, ['content.malicious.eicar-test-signature']);
    assert.deepEqual(result.metadata, { source: 'web' });
    const trace = (await (
      await fetch(`${svc.url}/v2.2/files/${body.id}/trace`, {
        headers: { authorization: svc.auth },
      })
    ).json()) as { events: Array<{ message: string }> };
    assert.deepEqual(
      trace.events.map((e) => e.message.split(':')[0]),
      [
        'received',
        'downloaded',
        'engine clamav (MALWARE)',
        'engine clamav versions',
        // Text: the language engine reads it (its verdict, then its own line); images engine declines.
        'engine nsfw-language (NSFW_LANGUAGE)',
        'nsfw-language',
        'engine nsfw-image (NSFW_IMAGE)',
        'processed',
      ],
    );
  });

  test('a 404 URL gives a 200 result with error, never a clean one', async (t) => {
    const svc = await buildService(t, allowLocal());
    const { body } = await submitFetch(svc.url, svc.auth, {
      location: `${content.url}/missing`,
      'metadata[k]': 'v',
    });
    const result = await pollResult(svc.url, svc.auth, String(body.id));
    assert.equal(result.id, body.id);
    assert.deepEqual(result.metadata, { k: 'v' });
    assert.match(String(result.error), /404/);
    assert.equal('findings' in result, false);
  });

  test('202 at once, without waiting for a slow remote', async (t) => {
    const svc = await buildService(t, allowLocal());
    const started = Date.now();
    const { response } = await submitFetch(svc.url, svc.auth, { location: `${content.url}/stall` });
    assert.equal(response.status, 202);
    assert.ok(Date.now() - started < 1_000, 'answered before the remote did');
  });

  test('400 when location is missing or not an http(s) URL', async (t) => {
    const svc = await buildService(t, allowLocal());
    const cases: Array<Record<string, string>> = [
      {},
      { location: '' },
      { location: 'not a url' },
      { location: 'ftp://example.com/x' },
      { location: 'file:///etc/passwd' },
    ];
    for (const fields of cases) {
      const { response, body } = await submitFetch(svc.url, svc.auth, fields);
      assert.equal(response.status, 400, JSON.stringify(fields));
      assert.match(String(body.error), /location/);
    }
  });

  test('SSRF: private, loopback, link-local and mapped addresses are refused with a reason', async (t) => {
    // The default policy: nothing private is allowed.
    const svc = await buildService(t, { ASSAY_CLAMD: clamd.socket });
    const refused = [
      'http://127.0.0.1/',
      'http://10.0.0.1/',
      'http://169.254.169.254/latest/meta-data/',
      'http://[::1]/',
      'http://[::ffff:127.0.0.1]/',
      `http://localhost:${content.port}/eicar.txt`,
    ];
    const requestsBefore = content.requests.length;
    for (const location of refused) {
      const { body } = await submitFetch(svc.url, svc.auth, { location });
      const result = await pollResult(svc.url, svc.auth, String(body.id));
      assert.match(String(result.error), /refused/, `${location}: ${result.error}`);
      assert.match(String(result.error), /loopback|private|link-local/, location);
      // What the person who runs the service would change to allow it.
      assert.match(String(result.error), /listed in ASSAY_FETCH_ALLOW$/, location);
      assert.equal('findings' in result, false);
    }
    assert.equal(content.requests.length, requestsBefore, 'no request reached the local server');
  });

  test('SSRF: an allowed URL that redirects to a private address is refused', async (t) => {
    const svc = await buildService(t, allowLocal());
    for (const path of ['/to-metadata', '/to-private']) {
      const { body } = await submitFetch(svc.url, svc.auth, { location: `${content.url}${path}` });
      const result = await pollResult(svc.url, svc.auth, String(body.id));
      assert.match(String(result.error), /refused/, `${path}: ${result.error}`);
    }
  });

  test('an allowed host name resolving to a cloud metadata address is refused before connecting', async (t) => {
    // DNS for the test: allowed.test points at the local server, the meta names at metadata.
    const answers: Record<string, string> = {
      'allowed.test': '127.0.0.1',
      'meta4.allowed.test': '169.254.169.254',
      'meta6.allowed.test': 'fd00:ec2::254',
      'ecs.allowed.test': '169.254.170.2',
    };
    const resolve = async (name: string) => {
      const address = answers[name];
      if (address === undefined) throw Object.assign(new Error('no'), { code: 'ENOTFOUND' });
      return [{ address, family: address.includes(':') ? 6 : 4 }];
    };
    const byName = { ASSAY_CLAMD: clamd.socket, ASSAY_FETCH_ALLOW: 'allowed.test, *.allowed.test' };
    const svc = await buildService(t, byName, undefined, { resolve });
    const clean = await submitFetch(svc.url, svc.auth, {
      location: `http://allowed.test:${content.port}/clean.txt`,
    });
    assert.deepEqual((await pollResult(svc.url, svc.auth, String(clean.body.id))).findings, []);
    for (const name of ['meta4', 'meta6', 'ecs']) {
      const { body } = await submitFetch(svc.url, svc.auth, {
        location: `http://${name}.allowed.test:${content.port}/clean.txt`,
      });
      const result = await pollResult(svc.url, svc.auth, String(body.id));
      assert.match(String(result.error), /refused .*metadata/, `${name}: ${result.error}`);
      assert.equal('findings' in result, false);
    }
  });
});

describe('v2.2 POST /files with location', () => {
  test('downloads, processes and answers 201 like an upload', async (t) => {
    const svc = await buildService(t, allowLocal());
    const response = await fetch(`${svc.url}/v2.2/files`, {
      method: 'POST',
      headers: { authorization: svc.auth },
      body: (() => {
        const form = new FormData();
        form.append('location', `${content.url}/eicar.txt`);
        form.append('metadata[a]', 'b');
        return form;
      })(),
    });
    assert.equal(response.status, 201);
    const body = (await response.json()) as Record<string, unknown>;
    assert.deepEqual(body.findings, ['content.malicious.eicar-test-signature']);
    assert.deepEqual(body.metadata, { a: 'b' });
    assert.equal(response.headers.get('location'), `${svc.url}/v2.2/files/${body.id}`);
  });

  test('400 for both file and location, for neither, and for a refused location', async (t) => {
    const svc = await buildService(t, allowLocal());
    const both = uploadForm('hello', { location: `${content.url}/clean.txt` });
    const neither = new FormData();
    neither.append('metadata[a]', 'b');
    const refused = new FormData();
    refused.append('location', 'http://169.254.169.254/');
    for (const [name, body] of [
      ['both', both],
      ['neither', neither],
      ['refused', refused],
    ] as const) {
      const response = await fetch(`${svc.url}/v2.2/files`, {
        method: 'POST',
        headers: { authorization: svc.auth },
        body,
      });
      assert.equal(response.status, 400, name);
      assert.equal(typeof ((await response.json()) as Record<string, unknown>).error, 'string');
    }
  });

  test('a failing download answers 502, never a result', async (t) => {
    const svc = await buildService(t, allowLocal());
    const form = new FormData();
    form.append('location', `${content.url}/missing`);
    const response = await fetch(`${svc.url}/v2.2/files`, {
      method: 'POST',
      headers: { authorization: svc.auth },
      body: form,
    });
    assert.equal(response.status, 502);
    assert.match(String(((await response.json()) as Record<string, unknown>).error), /404/);
  });

  test('location is a v2.2 argument: v2.1 ignores it and wants a file', async (t) => {
    const svc = await buildService(t, allowLocal());
    const form = new FormData();
    form.append('location', `${content.url}/eicar.txt`);
    const response = await fetch(`${svc.url}/v2.1/files`, {
      method: 'POST',
      headers: { authorization: svc.auth },
      body: form,
    });
    assert.equal(response.status, 400);
  });
});
