import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { eicar } from '../../src/engines/test-content.js';
import { uploadForm } from '../helpers/content.js';
import { legacyRequest } from '../helpers/legacy.js';
import { buildService, useSharedClamd } from '../helpers/service.js';

const clamd = useSharedClamd();
const env = () => ({ ASSAY_CLAMD: clamd.socket });

async function errorOf(response: Response, status: number): Promise<string> {
  assert.equal(response.status, status, `${response.url}: ${response.status}`);
  assert.equal(response.headers.get('content-type'), 'application/json');
  const body = (await response.json()) as Record<string, unknown>;
  assert.deepEqual(Object.keys(body), ['error']);
  return String(body.error);
}

describe('one rule for trailing slashes: every path answers with or without one', () => {
  test('v2: ping, uploads, tokens, results and the trace, each with a trailing slash', async (t) => {
    const svc = await buildService(t, env());
    const auth = { authorization: svc.auth };
    const base = `${svc.url}/v2.2`;
    for (const path of ['/ping', '/ping/']) {
      const response = await fetch(`${base}${path}`, { headers: auth });
      assert.equal(response.status, 200, path);
      assert.equal(((await response.json()) as { message: string }).message, 'pong');
    }

    // `/files/async/` is the async upload, not the result of an item called "async".
    const accepted = await fetch(`${base}/files/async/`, {
      method: 'POST',
      headers: auth,
      body: uploadForm('trailing slash'),
    });
    assert.equal(accepted.status, 202, await accepted.clone().text());
    const { id } = (await accepted.json()) as { id: string };
    assert.match(id, /^[0-9a-f]{32}$/);
    assert.equal(accepted.headers.get('location'), `${base}/files/${id}`);

    const created = await fetch(`${base}/files/`, {
      method: 'POST',
      headers: auth,
      body: uploadForm(eicar()),
    });
    assert.equal(created.status, 201);
    const file = (await created.json()) as { id: string };
    for (const path of [`/files/${file.id}/`, `/files/${file.id}/trace/`]) {
      const response = await fetch(`${base}${path}`, { headers: auth });
      assert.equal(response.status, 200, path);
      await response.body?.cancel();
    }

    for (const path of ['/auth/tokens', '/auth/tokens/']) {
      const token = await fetch(`${base}${path}`, { method: 'POST', headers: auth });
      assert.equal(token.status, 201, path);
      const { id: tokenId } = (await token.json()) as { id: string };
      const read = await fetch(`${base}/auth/tokens/${tokenId}/`, { headers: auth });
      assert.equal(read.status, 200, path);
      await read.body?.cancel();
      const deleted = await fetch(`${base}/auth/tokens/${tokenId}/`, {
        method: 'DELETE',
        headers: auth,
      });
      assert.equal(deleted.status, 204, path);
    }

    // Open routes too; two slashes are not one.
    for (const path of ['/health/live/', '/v2.2/openapi.json/', '/docs/']) {
      const response = await fetch(`${svc.url}${path}`);
      assert.equal(response.status, 200, path);
      await response.body?.cancel();
    }
    await errorOf(await fetch(`${base}/ping//`, { headers: auth }), 404);
  });

  test('405 only for a path served with other methods, with Allow; 404 for any other', async (t) => {
    const svc = await buildService(t, env());
    const auth = { authorization: svc.auth };
    const base = `${svc.url}/v2.2`;
    const id = 'f'.repeat(32);
    const wrongMethod: Array<[string, string, string]> = [
      ['PUT', '/ping', 'GET, HEAD'],
      ['PUT', '/ping/', 'GET, HEAD'],
      ['POST', '/ping/', 'GET, HEAD'],
      // Read as the item `async`, posted as itself: both are allowed.
      ['DELETE', '/files/async/', 'GET, HEAD, POST'],
      ['PUT', '/files/', 'POST'],
      ['PUT', `/files/${id}/`, 'GET, HEAD'],
      ['PUT', '/auth/tokens/', 'POST'],
      ['POST', `/auth/tokens/${id}`, 'DELETE, GET, HEAD'],
    ];
    for (const [method, path, allow] of wrongMethod) {
      const response = await fetch(`${base}${path}`, { method, headers: auth });
      const message = await errorOf(response, 405);
      assert.equal(response.headers.get('allow'), allow, `${method} ${path}`);
      assert.equal(message, `method ${method} is not allowed here; use ${allow}`);
    }
    for (const [method, path] of [
      ['GET', '/files/abc/def'],
      ['PUT', '/files/abc/def'],
      ['GET', '/nothing'],
      ['GET', '/nothing/'],
      ['GET', '/ping/extra'],
      ['POST', '/files/async/extra/'],
    ] as const) {
      const response = await fetch(`${base}${path}`, { method, headers: auth });
      assert.match(await errorOf(response, 404), /^no resource at /, `${method} ${path}`);
      assert.equal(response.headers.get('allow'), null);
    }
  });

  test('v1.0: the same rule, in its own format', async (t) => {
    const svc = await buildService(t, env());
    const auth = { authorization: svc.auth };
    for (const path of ['/api/scan', '/api/scan/']) {
      const answer = await legacyRequest(`${svc.url}${path}`, {
        method: 'POST',
        headers: auth,
        body: eicar(),
        format: 'xml',
      });
      assert.equal(answer.body.status, 'infected', `${path}: ${answer.text}`);
    }
    const pending = await legacyRequest(`${svc.url}/api/scan/async/`, {
      method: 'POST',
      headers: auth,
      body: eicar(),
    });
    assert.equal(pending.body.status, 'pending', pending.text);
    const status = await legacyRequest(`${svc.url}/api/scan/status/${pending.body.request_id}/`, {
      headers: auth,
      format: 'yaml',
    });
    assert.equal(status.status, 200, status.text);

    // A known path with another method: v1.0's 400 with Allow; an unknown path: 404.
    const wrong = await legacyRequest(`${svc.url}/api/scan/status/${pending.body.request_id}/`, {
      method: 'PUT',
      headers: auth,
      format: 'xml',
    });
    assert.equal(wrong.status, 400, wrong.text);
    assert.equal(wrong.body.status, 'oops');
    assert.equal(wrong.headers.get('allow'), 'GET, HEAD');
    assert.match(wrong.body.reason ?? '', /method PUT is not allowed here; use GET, HEAD/);
    // Only POST is allowed on a scan resource (other methods are refused as v1.0 says).
    const locked = await legacyRequest(`${svc.url}/api/scan/async/`, {
      method: 'PROPFIND',
      headers: auth,
      format: 'xml',
    });
    assert.equal(locked.status, 400, locked.text);
    assert.equal(locked.headers.get('allow'), 'POST');
    for (const path of ['/api/scan/status/a/b', '/api/scan/elsewhere/', '/api/scan/async/x']) {
      const missing = await legacyRequest(`${svc.url}${path}`, { headers: auth, format: 'xml' });
      assert.equal(missing.status, 404, path);
      assert.equal(missing.body.reason, 'no such v1.0 resource', path);
    }
  });
});

describe('/', () => {
  // Chromium's Accept for a page it navigates to.
  const browser = 'text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,*/*;q=0.8';

  test("a browser's request for / goes to the web console", async (t) => {
    const svc = await buildService(t, env());
    for (const method of ['GET', 'HEAD']) {
      const response = await fetch(`${svc.url}/`, {
        method,
        headers: { accept: browser },
        redirect: 'manual',
      });
      assert.equal(response.status, 303, method);
      assert.equal(response.headers.get('location'), '/console', method);
    }
    const followed = await fetch(`${svc.url}/`, { headers: { accept: browser } });
    assert.equal(followed.status, 200);
    assert.match(followed.headers.get('content-type') ?? '', /^text\/html/);
    assert.match(followed.url, /\/console\/sign-in/);
  });

  test("an API client's request for / is answered as before: 404, in the API's shape", async (t) => {
    const svc = await buildService(t, env());
    const requests: Array<[string, Record<string, string>]> = [
      ['GET', {}],
      ['GET', { accept: '*/*' }],
      ['GET', { accept: 'application/json' }],
      ['GET', { accept: 'text/html;q=0, application/json' }],
      ['GET', { accept: 'text/htmlx' }],
      ['POST', { accept: browser }],
    ];
    for (const [method, headers] of requests) {
      const response = await fetch(`${svc.url}/`, { method, headers, redirect: 'manual' });
      const label = `${method} ${JSON.stringify(headers)}`;
      assert.equal(await errorOf(response, 404), 'no resource at /', label);
    }
    const head = await fetch(`${svc.url}/`, { method: 'HEAD' });
    assert.equal(head.status, 404);
    // Only / itself: another unknown path is a 404 for a browser too.
    const other = await fetch(`${svc.url}/nothing`, { headers: { accept: browser } });
    assert.equal(await errorOf(other, 404), 'no resource at /nothing');
  });
});
