import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { uploadForm } from '../helpers/content.js';
import { capturedLogger } from '../helpers/logs.js';
import { basic, buildService, tempDir, useSharedClamd } from '../helpers/service.js';

const clamd = useSharedClamd();

describe('logs', () => {
  test('JSON lines with the request id; never a secret or an Authorization header', async (t) => {
    const { lines, logger } = capturedLogger();
    const svc = await buildService(
      t,
      { ASSAY_CLAMD: clamd.socket, ASSAY_BOOTSTRAP_CREDENTIALS: 'boot:boot-secret-value' },
      logger,
    );
    const ping = await fetch(`${svc.url}/v2.2/ping`, { headers: { authorization: svc.auth } });
    const requestId = ping.headers.get('x-service-request-id') ?? '';
    await fetch(`${svc.url}/v2.2/files`, {
      method: 'POST',
      headers: { authorization: svc.auth },
      body: uploadForm('hello'),
    });
    await fetch(`${svc.url}/v2.2/ping`, {
      headers: { authorization: basic(svc.keyId, 'a-wrong-secret-value') },
    });

    const records = lines.map((line) => JSON.parse(line) as Record<string, unknown>);
    assert.ok(
      records.some((r) => r.reqId === requestId),
      'the request id is in the log',
    );
    const all = lines.join('\n');
    for (const secret of [svc.secret, 'boot-secret-value', 'a-wrong-secret-value']) {
      assert.equal(all.includes(secret), false, 'a secret reached the log');
    }
    assert.equal(
      all.includes(svc.auth.slice('Basic '.length)),
      false,
      'an Authorization value reached the log',
    );
    assert.doesNotMatch(all, /"authorization"/i);
  });
});

describe('readiness', () => {
  test('ready lists the malware engine with its version', async (t) => {
    const svc = await buildService(t, { ASSAY_CLAMD: clamd.socket });
    const response = await fetch(`${svc.url}/health/ready`);
    assert.equal(response.status, 200);
    const body = (await response.json()) as {
      status: string;
      engines: Array<Record<string, unknown>>;
    };
    assert.equal(body.status, 'ready');
    const engine = body.engines.find((e) => e.name === 'clamav');
    assert.ok(engine, 'clamav is listed');
    assert.match(String(engine.version), /^ClamAV \d+\.\d+/);
    assert.equal(engine.category, 'MALWARE');
    assert.ok('signatures_version' in engine && 'signatures_age_seconds' in engine);
    assert.match(String(engine.own_signatures_version), /^sha256:[0-9a-f]{16}$/);
    assert.equal(JSON.stringify(body).includes(svc.dataDir), false, 'no data directory');
    assert.equal(JSON.stringify(body).includes(clamd.socket), false, 'no socket path');
  });

  test('not ready says which part fails, never a path', async (t) => {
    const socket = `${tempDir('assay-no-clamd-')}/clamd.sock`;
    const svc = await buildService(t, { ASSAY_CLAMD: socket });
    const response = await fetch(`${svc.url}/health/ready`);
    assert.equal(response.status, 503);
    const text = await response.text();
    const body = JSON.parse(text) as { status: string; problems: string[] };
    assert.equal(body.status, 'not ready');
    assert.deepEqual(body.problems, ['clamav: not answering (ENOENT)']);
    for (const path of [socket, svc.dataDir, '/tmp/']) {
      assert.equal(text.includes(path), false, `${path} in ${text}`);
    }
  });
});

describe('token ids are credentials', () => {
  test('a token id never reaches the log: not from its URL, its use, nor an error', async (t) => {
    const { lines, logger } = capturedLogger('trace');
    const svc = await buildService(t, { ASSAY_CLAMD: clamd.socket }, logger);
    const created = await fetch(`${svc.url}/v2.2/auth/tokens`, {
      method: 'POST',
      headers: { authorization: svc.auth },
    });
    assert.equal(created.status, 201);
    const { id } = (await created.json()) as { id: string };
    const asToken = { authorization: basic(id, '') };
    const asKey = { authorization: svc.auth };
    const requests: Array<[string, string, Record<string, string>, number]> = [
      ['GET', `/v2.2/auth/tokens/${id}`, asKey, 200],
      // Spellings that still name the token: encoded, another case, a query, a path below it.
      ['GET', `/v2.2/auth/%74okens/${id}`, asKey, 200],
      ['GET', `/v2.2/auth/tokens/${id}?x=1`, asKey, 200],
      ['GET', `/v2.2/AUTH/Tokens/${id}`, asKey, 404],
      ['GET', `/v2.2/auth/tokens/${id}/more`, asKey, 404],
      ['GET', `/v2.1/auth/tokens/${id.slice(0, 16)}%${id.slice(16, 18)}${id.slice(18)}`, asKey, 0],
      ['GET', '/v2.2/ping', asToken, 200],
      ['POST', '/v2.2/files', asToken, 201],
      ['DELETE', `/v2.2/auth/tokens/${id}`, asKey, 204],
      ['GET', `/v2.2/auth/tokens/${id}`, asKey, 404],
      ['GET', '/v2.2/ping', asToken, 401],
    ];
    for (const [method, path, headers, status] of requests) {
      const response = await fetch(`${svc.url}${path}`, {
        method,
        headers,
        body: method === 'POST' ? uploadForm('hello') : undefined,
      });
      await response.arrayBuffer();
      if (status !== 0) assert.equal(response.status, status, `${method} ${path}`);
    }
    const all = lines.join('\n');
    assert.match(all, /"url":"\/v2\.2\/auth\/tokens\/\[redacted\]"/, 'requests are logged');
    assert.equal(all.includes(id), false, 'the token id reached the log');
    assert.equal(all.includes(id.slice(0, 16)), false, 'part of the token id reached the log');
  });
});
