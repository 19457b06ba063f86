import '../helpers/loopback-only.js';
import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { loadConfig } from '../../src/config.js';
import { eicar } from '../../src/engines/test-content.js';
import { startService } from '../../src/service.js';
import { randomContent, sha1 } from '../helpers/content.js';
import { FORMATS, type LegacyFormat, legacyRequest, UUID } from '../helpers/legacy.js';
import { buildService, quietLogger, useSharedClamd } from '../helpers/service.js';
import { storeEnv, TEST_POOL_ENV } from '../helpers/test-database.js';

const clamd = useSharedClamd();
const env = () => ({ ASSAY_CLAMD: clamd.socket });

function post(auth: string, body: Buffer | string, headers: Record<string, string> = {}) {
  return {
    method: 'POST',
    headers: { authorization: auth, ...headers },
    body: typeof body === 'string' ? body : new Uint8Array(body),
  };
}

/** A POST whose body streams in `count` chunks, with chunked encoding and no Content-Length. */
function chunked(auth: string, count: number, size: number): RequestInit {
  let sent = 0;
  const body = new ReadableStream<Uint8Array>({
    pull(controller) {
      if (sent === count) return controller.close();
      sent += 1;
      controller.enqueue(new Uint8Array(randomContent(size)));
    },
  });
  // duplex is required by Node's fetch for a streamed body, and missing from RequestInit's type.
  return { method: 'POST', headers: { authorization: auth }, body, duplex: 'half' } as RequestInit;
}

async function pollStatus(
  url: string,
  auth: string,
  requestId: string,
  format: LegacyFormat = 'json',
) {
  const deadline = Date.now() + 15_000;
  while (Date.now() < deadline) {
    const answer = await legacyRequest(`${url}/api/scan/status/${requestId}`, {
      headers: { authorization: auth },
      format,
    });
    assert.equal(answer.status, 200, answer.text);
    if (answer.body.status !== 'pending') return answer;
    await sleep(20);
  }
  throw new Error(`${requestId} still pending`);
}

async function fileCount(svc: Awaited<ReturnType<typeof buildService>>): Promise<number> {
  const row = await svc.store.db
    .selectFrom('files')
    .select((eb) => eb.fn.countAll<number>().as('count'))
    .executeTakeFirstOrThrow();
  return Number(row.count);
}

describe('v1.0 POST /api/scan/', () => {
  test('EICAR is infected and a clean file is clean, in JSON, XML and YAML', async (t) => {
    const svc = await buildService(t, env());
    for (const format of FORMATS) {
      const infected = await legacyRequest(`${svc.url}/api/scan/`, {
        ...post(svc.auth, eicar()),
        format,
      });
      assert.equal(infected.status, 200, infected.text);
      assert.equal(infected.body.status, 'infected', infected.text);
      assert.deepEqual(infected.body.virus, ['eicar-test-signature']);
      assert.equal(infected.body.checksum, sha1(eicar()));
      assert.match(infected.body.request_id ?? '', UUID);
      assert.equal('reason' in infected.body, false);

      const content = randomContent(5000);
      const clean = await legacyRequest(`${svc.url}/api/scan/`, {
        ...post(svc.auth, content, { 'content-type': 'application/octet-stream' }),
        format,
      });
      assert.equal(clean.status, 200, clean.text);
      assert.deepEqual(
        { ...clean.body, request_id: undefined },
        { status: 'clean', checksum: sha1(content), request_id: undefined },
      );
      assert.match(clean.body.request_id ?? '', UUID);
      assert.notEqual(clean.body.request_id, infected.body.request_id);
    }
  });

  test('any declared type is raw content: curl --data-binary sends it as a form', async (t) => {
    const svc = await buildService(t, env());
    const content = 'name=value&other=1';
    const answer = await legacyRequest(`${svc.url}/api/scan`, {
      ...post(svc.auth, content, { 'content-type': 'application/x-www-form-urlencoded' }),
    });
    assert.equal(answer.body.status, 'clean', answer.text);
    assert.equal(answer.body.checksum, sha1(content));
  });

  test('the result is stored: status reads it back, also after a restart; it costs one credit', async (t) => {
    const svc = await buildService(t, env());
    const before = (await svc.store.accounts.find(svc.accountId))?.balance ?? 0;
    const scanned = await legacyRequest(`${svc.url}/api/scan/`, post(svc.auth, eicar()));
    assert.equal((await svc.store.accounts.find(svc.accountId))?.balance, before - 1);
    const requestId = scanned.body.request_id ?? '';
    await svc.service.stop();
    const restarted = await startService(
      loadConfig({
        ASSAY_PORT: '0',
        ASSAY_DATA_DIR: svc.dataDir,
        ...TEST_POOL_ENV,
        ...storeEnv(svc.dataDir),
        ...env(),
      }),
      quietLogger,
    );
    try {
      for (const format of FORMATS) {
        const status = await legacyRequest(`${restarted.url}/api/scan/status/${requestId}`, {
          headers: { authorization: svc.auth },
          format,
        });
        assert.equal(status.status, 200, status.text);
        assert.deepEqual(status.body, scanned.body, format);
      }
      // One store for both APIs: the same item is a v2.x file.
      const v2 = await fetch(`${restarted.url}/v2.2/files/${requestId.replaceAll('-', '')}`, {
        headers: { authorization: svc.auth },
      });
      const file = (await v2.json()) as { findings: string[] };
      assert.deepEqual(file.findings, ['content.malicious.eicar-test-signature']);
    } finally {
      await restarted.stop();
    }
  });

  test('a body over the legacy maximum POST size is 413, declared or streamed, and records nothing', async (t) => {
    const svc = await buildService(t, { ...env(), ASSAY_LEGACY_MAX_POST_SIZE: '10000' });
    const declared = await legacyRequest(
      `${svc.url}/api/scan/`,
      post(svc.auth, randomContent(10_001)),
    );
    assert.equal(declared.status, 413, declared.text);
    assert.equal(declared.body.status, 'oops');
    assert.match(declared.body.reason ?? '', /10000 bytes/);
    // Chunked, no Content-Length: the limit holds while streaming.
    const streamed = await legacyRequest(`${svc.url}/api/scan/`, chunked(svc.auth, 20, 1000));
    assert.equal(streamed.status, 413, streamed.text);
    for (const path of ['/api/scan/', '/api/scan/async']) {
      const exact = await legacyRequest(`${svc.url}${path}`, post(svc.auth, randomContent(10_000)));
      assert.equal(exact.status, 200, `${path}: exactly the limit is fine: ${exact.text}`);
    }
    const overAsync = await legacyRequest(`${svc.url}/api/scan/async`, chunked(svc.auth, 20, 1000));
    assert.equal(overAsync.status, 413, overAsync.text);
    await sleep(300);
    assert.equal(await fileCount(svc), 2, 'only the two uploads within the limit were recorded');
  });

  test('an upload cut off mid-body records nothing', async (t) => {
    const svc = await buildService(t, env());
    const { port } = new URL(svc.url);
    for (const path of ['/api/scan/', '/api/scan/async']) {
      const socket = connect(Number(port), '127.0.0.1');
      await new Promise((resolve) => socket.once('connect', resolve));
      socket.write(
        `POST ${path} HTTP/1.1\r\nHost: x\r\nAuthorization: ${svc.auth}\r\nContent-Length: 100000\r\n\r\n`,
      );
      socket.write(eicar());
      await sleep(200);
      socket.destroy();
    }
    await sleep(500);
    assert.equal(await fileCount(svc), 0);
    const jobs = await svc.store.db.selectFrom('jobs').selectAll().execute();
    assert.deepEqual(jobs, []);
  });

  test('ASSAY_LEGACY_BASE_URL puts v1.0 under its path', async (t) => {
    const svc = await buildService(t, {
      ...env(),
      ASSAY_LEGACY_BASE_URL: 'https://legacy.example.com/old/',
    });
    const moved = await legacyRequest(`${svc.url}/old/api/scan/`, post(svc.auth, eicar()));
    assert.equal(moved.body.status, 'infected', moved.text);
    const root = await fetch(`${svc.url}/api/scan/`, post(svc.auth, eicar()));
    assert.equal(root.status, 404);
  });

  test('a method other than POST is oops saying POST is required', async (t) => {
    const svc = await buildService(t, env());
    for (const path of ['/api/scan/', '/api/scan/async', '/api/scan/fetch']) {
      for (const method of ['GET', 'PUT', 'DELETE']) {
        const answer = await legacyRequest(`${svc.url}${path}`, {
          method,
          headers: { authorization: svc.auth },
          format: 'xml',
        });
        assert.equal(answer.status, 400, `${method} ${path}`);
        assert.equal(answer.body.status, 'oops');
        assert.match(answer.body.reason ?? '', /POST is required/);
        assert.match(answer.body.request_id ?? '', UUID);
      }
    }
  });
});

describe('v1.0 POST /api/scan/async and GET /api/scan/status', () => {
  test('pending with checksum and request_id, then the result, in each format', async (t) => {
    const svc = await buildService(t, env());
    for (const format of FORMATS) {
      const submitted = await legacyRequest(`${svc.url}/api/scan/async`, {
        ...post(svc.auth, eicar()),
        format,
      });
      assert.equal(submitted.status, 200, submitted.text);
      assert.equal(submitted.body.status, 'pending');
      assert.equal(submitted.body.checksum, sha1(eicar()));
      assert.match(submitted.body.request_id ?? '', UUID);
      const done = await pollStatus(svc.url, svc.auth, submitted.body.request_id ?? '', format);
      assert.deepEqual(done.body, {
        status: 'infected',
        virus: ['eicar-test-signature'],
        checksum: sha1(eicar()),
        request_id: submitted.body.request_id,
      });
    }
    const content = randomContent(3000);
    const clean = await legacyRequest(`${svc.url}/api/scan/async`, post(svc.auth, content));
    const done = await pollStatus(svc.url, svc.auth, clean.body.request_id ?? '');
    assert.equal(done.body.status, 'clean');
    assert.equal(done.body.checksum, sha1(content));
  });

  test('status is 404 for an invalid, unknown or other account’s request_id', async (t) => {
    const svc = await buildService(t, env());
    const mine = await legacyRequest(`${svc.url}/api/scan/`, post(svc.auth, 'mine'));
    const other = await svc.createAccountKey();
    for (const id of ['nope', '00000000-0000-4000-8000-000000000000', mine.body.request_id]) {
      for (const format of FORMATS) {
        const answer = await legacyRequest(`${svc.url}/api/scan/status/${id}`, {
          headers: { authorization: other.auth },
          format,
        });
        assert.equal(answer.status, 404, `${id} ${format}`);
        assert.equal(answer.body.status, 'oops');
        assert.match(answer.body.reason ?? '', /request_id/);
      }
    }
  });
});
