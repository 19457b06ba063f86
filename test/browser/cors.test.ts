import '../helpers/loopback-only.js';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { Writable } from 'node:stream';
import { describe, test } from 'node:test';
import type { Page } from 'playwright-core';
import { loadConfig } from '../../src/config.js';
import { eicar } from '../../src/engines/test-content.js';
import { createLogger } from '../../src/logger.js';
import { useBrowser } from '../helpers/browser.js';
import { uploadForm } from '../helpers/content.js';
import { type LocalServer, startLocalServer } from '../helpers/local-server.js';
import { basic, buildService, useSharedClamd } from '../helpers/service.js';

const clamd = useSharedClamd();
const chromium = useBrowser();

/**
 * What a web app on another origin does: fetch with a token in `Authorization` (which makes the
 * browser send a CORS preflight first), then read the status, the headers CORS lets it see and the
 * JSON body. Content arrives as character codes so no EICAR literal exists anywhere.
 */
const PAGE = `<!doctype html>
<html><head><meta charset="utf-8"><title>upload</title></head><body><script>
async function call(method, url, tokenId, body) {
  try {
    const response = await fetch(url, {
      method,
      headers: { Authorization: 'Basic ' + btoa(tokenId + ':') },
      body,
    });
    return {
      status: response.status,
      headers: Object.fromEntries(response.headers),
      body: await response.json(),
    };
  } catch (error) {
    return { failed: String(error) };
  }
}
function upload(url, tokenId, charCodes) {
  const form = new FormData();
  form.append('file', new Blob([String.fromCharCode(...charCodes)]), 'from-the-page.txt');
  return call('POST', url, tokenId, form);
}
function read(url, tokenId) {
  return call('GET', url, tokenId);
}
</script></body></html>`;

interface PageResult {
  status?: number;
  /** Only the headers CORS lets the page read. */
  headers?: Record<string, string>;
  body?: { id?: string; findings?: string[]; error?: string };
  /** The fetch rejected, as it does when CORS refuses. */
  failed?: string;
}

function servePage(): Promise<LocalServer> {
  return startLocalServer((_request, response) => {
    response.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
    response.end(PAGE);
  });
}

async function openPage(server: LocalServer): Promise<Page> {
  const page = await chromium.browser.newPage();
  await page.goto(`${server.url}/`);
  return page;
}

function inPage(page: Page, call: string, ...args: unknown[]): Promise<PageResult> {
  return page.evaluate(`${call}(${args.map((arg) => JSON.stringify(arg)).join(', ')})`);
}

const charCodes = (text: string) => [...text].map((char) => char.charCodeAt(0));

/** The methods and paths of the requests the service logged, in order. */
function requestLog() {
  const requests: string[] = [];
  const sink = new Writable({
    write(chunk, _encoding, done) {
      for (const line of String(chunk).split('\n').filter(Boolean)) {
        const record = JSON.parse(line) as { msg?: string; req?: { method: string; url: string } };
        if (record.msg === 'incoming request' && record.req !== undefined) {
          requests.push(`${record.req.method} ${record.req.url}`);
        }
      }
      done();
    },
  });
  return { requests, logger: createLogger(loadConfig({ ASSAY_LOG_LEVEL: 'info' }), sink) };
}

async function createToken(url: string, auth: string): Promise<string> {
  const response = await fetch(`${url}/v2.2/auth/tokens`, {
    method: 'POST',
    headers: { authorization: auth, 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ timeout: '300' }).toString(),
  });
  assert.equal(response.status, 201);
  return ((await response.json()) as { id: string }).id;
}

describe('a browser page on another origin', () => {
  test('uploads with a token after a preflight, reads Location and the findings, then the result', async (t) => {
    const { requests, logger } = requestLog();
    const svc = await buildService(t, { ASSAY_CLAMD: clamd.socket }, logger);
    const token = await createToken(svc.url, svc.auth);
    const site = await servePage();
    t.after(() => site.close());
    assert.notEqual(new URL(site.url).origin, new URL(svc.url).origin);
    const page = await openPage(site);

    const clean = await inPage(
      page,
      'upload',
      `${svc.url}/v2.2/files`,
      token,
      charCodes(`hello from a browser ${randomUUID()}`),
    );
    assert.equal(clean.failed, undefined, 'CORS let the upload through');
    assert.equal(clean.status, 201);
    assert.deepEqual(clean.body?.findings, []);
    const location = clean.headers?.location;
    assert.equal(location, `${svc.url}/v2.2/files/${clean.body?.id}`, 'Location is exposed');
    assert.match(clean.headers?.['x-service-request-id'] ?? '', /^[0-9a-f-]{36}$/);
    assert.deepEqual(requests.slice(-2), ['OPTIONS /v2.2/files', 'POST /v2.2/files']);

    const infected = await inPage(
      page,
      'upload',
      `${svc.url}/v2.2/files`,
      token,
      charCodes(eicar()),
    );
    assert.equal(infected.status, 201);
    assert.ok((infected.body?.findings ?? []).length > 0, 'EICAR has findings');

    const result = await inPage(page, 'read', location, token);
    assert.equal(result.failed, undefined, 'CORS let the read through');
    assert.equal(result.status, 200);
    assert.equal(result.body?.id, clean.body?.id);
    assert.deepEqual(result.body?.findings, []);
  });

  test('a wrong token gets 401 and the page can read the JSON error', async (t) => {
    const svc = await buildService(t, { ASSAY_CLAMD: clamd.socket });
    const site = await servePage();
    t.after(() => site.close());
    const page = await openPage(site);
    const unknownToken = randomUUID().replaceAll('-', '');
    const wrong = await inPage(
      page,
      'upload',
      `${svc.url}/v2.2/files`,
      unknownToken,
      charCodes('x'),
    );
    assert.equal(wrong.failed, undefined, 'CORS headers are on errors too');
    assert.equal(wrong.status, 401);
    assert.equal(wrong.headers?.['content-type'], 'application/json');
    const direct = await fetch(`${svc.url}/v2.2/files`, {
      method: 'POST',
      headers: { authorization: basic(unknownToken, '') },
      body: uploadForm('x'),
    });
    assert.deepEqual(wrong.body, await direct.json(), 'the page reads the error any client reads');
    assert.match(wrong.body?.error ?? '', /\w/);
  });

  test('the browser enforces CORS: the same upload to a server without CORS headers fails', async (t) => {
    const bare = await startLocalServer((_request, response) => {
      response.writeHead(201, { 'content-type': 'application/json' });
      response.end('{"findings":[]}');
    });
    t.after(() => bare.close());
    const site = await servePage();
    t.after(() => site.close());
    const page = await openPage(site);
    const refused = await inPage(page, 'upload', `${bare.url}/v2.2/files`, randomUUID(), [120]);
    assert.match(refused.failed ?? '', /TypeError/);
    assert.deepEqual(
      bare.requests.map((request) => request.method),
      ['OPTIONS'],
      'the preflight failed, so the upload was never sent',
    );
  });
});
