import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { eicar } from '../../src/engines/test-content.js';
import { waitUntil } from '../helpers/client.js';
import { randomContent } from '../helpers/content.js';
import {
  buildIcapService,
  chunked,
  httpRequestHead,
  httpResponseHead,
  icapRequest,
  RawIcapConnection,
} from '../helpers/icap.js';
import { useSharedClamd } from '../helpers/service.js';

// The ICAP framing as clients other than c-icap-client use it, written by hand: previews answered
// with 100 Continue (and clients that do not wait for it), persistent connections, Nextcloud's and
// an appliance's request shapes, and what broken framing, refusals and failures get.

const clamd = useSharedClamd();

function respmod(
  service: string,
  content: Buffer,
  headers: Record<string, string> = {},
  url = 'http://files.example/item.bin',
): Buffer {
  return icapRequest('RESPMOD', service, {
    requestHead: httpRequestHead(url),
    responseHead: httpResponseHead(content.length),
    body: true,
    headers,
  });
}

describe('ICAP framing', () => {
  test('a preview is answered with 100 Continue, whether the client waits for it or sends the rest at once', async (t) => {
    const svc = await buildIcapService(t, clamd.socket);
    const content = Buffer.concat([randomContent(30_000), Buffer.from(eicar())]);
    // Waits: the preview, then 100 Continue, then the rest.
    const waiting = new RawIcapConnection(svc.icapPort);
    t.after(() => waiting.close());
    waiting.write(
      Buffer.concat([
        respmod('avscan', content, { Preview: '1024', Allow: '204' }),
        chunked(content.subarray(0, 1024)),
      ]),
    );
    const carryOn = await waiting.response();
    assert.equal(carryOn.status, 100);
    waiting.write(chunked(content.subarray(1024), 8000));
    const verdict = await waiting.response();
    assert.equal(verdict.status, 200);
    assert.match(verdict.heads, /^HTTP\/1\.1 403 Forbidden/);
    assert.match(verdict.headers.get('x-infection-found') ?? '', /eicar/);
    // Does not wait (RFC 3507 erratum 5893): the rest follows the preview at once.
    const eager = new RawIcapConnection(svc.icapPort);
    t.after(() => eager.close());
    eager.write(
      Buffer.concat([
        respmod('avscan', content, { Preview: '1024' }),
        chunked(content.subarray(0, 1024)),
        chunked(content.subarray(1024), 8000),
      ]),
    );
    assert.equal((await eager.response()).status, 100);
    const eagerVerdict = await eager.response();
    assert.equal(eagerVerdict.status, 200);
    assert.match(eagerVerdict.heads, /403 Forbidden/);
    // A body that ends within its preview (ieof) needs no 100 Continue, and 204 is allowed.
    const small = new RawIcapConnection(svc.icapPort);
    t.after(() => small.close());
    small.write(
      Buffer.concat([
        respmod('avscan', Buffer.from('hello'), { Preview: '1024' }),
        chunked(Buffer.from('hello'), 1024, true),
      ]),
    );
    assert.equal((await small.response()).status, 204);
  });

  test('one connection serves request after request', async (t) => {
    const svc = await buildIcapService(t, clamd.socket);
    const connection = new RawIcapConnection(svc.icapPort);
    t.after(() => connection.close());
    connection.write('OPTIONS icap://127.0.0.1/avscan ICAP/1.0\r\nHost: 127.0.0.1\r\n\r\n');
    const options = await connection.response();
    assert.equal(options.status, 200);
    const tag = options.headers.get('istag');
    for (let round = 0; round < 3; round++) {
      const clean = randomContent(2000 + round);
      connection.write(
        Buffer.concat([respmod('avscan', clean, { Allow: '204' }), chunked(clean, 700)]),
      );
      const passed = await connection.response();
      assert.equal(passed.status, 204);
      assert.equal(passed.headers.get('istag'), tag, 'every answer carries the same ISTag');
      const flagged = Buffer.from(eicar());
      connection.write(Buffer.concat([respmod('avscan', flagged), chunked(flagged)]));
      const blocked = await connection.response();
      assert.equal(blocked.status, 200);
      assert.match(blocked.body?.toString() ?? '', /eicar/);
    }
    // Nothing to scan (a GET's REQMOD): 204 at once, no result.
    connection.write(
      icapRequest('REQMOD', 'avscan', {
        requestHead: httpRequestHead('http://files.example/'),
        headers: { Allow: '204' },
      }),
    );
    assert.equal((await connection.response()).status, 204);
    assert.equal(connection.isClosed, false);
  });

  test("Nextcloud's shape (REQMOD, no preview, Allow: 204, 1 MiB chunks) and an appliance's (ISTag from OPTIONS, then RESPMOD)", async (t) => {
    const svc = await buildIcapService(t, clamd.socket);
    // Nextcloud's files_antivirus: a PUT of the file to the avscan service.
    const upload = (content: Buffer) =>
      Buffer.concat([
        icapRequest('REQMOD', 'avscan', {
          requestHead: httpRequestHead(
            'http://cloud.example/remote.php/dav/files/alice/report.pdf',
            'PUT',
            `Content-Length: ${content.length}\r\n`,
          ),
          body: true,
          headers: { Allow: '204' },
        }),
        chunked(content, 1024 * 1024),
      ]);
    const nextcloud = new RawIcapConnection(svc.icapPort);
    t.after(() => nextcloud.close());
    nextcloud.write(upload(randomContent(3 * 1024 * 1024 + 17)));
    assert.equal((await nextcloud.response()).status, 204);
    nextcloud.write(upload(Buffer.concat([randomContent(2 * 1024 * 1024), Buffer.from(eicar())])));
    const infected = await nextcloud.response();
    assert.equal(infected.status, 200);
    assert.match(
      infected.headers.get('x-infection-found') ?? '',
      /^Type=0; Resolution=2; Threat=content\.malicious\.eicar-test-signature;$/,
    );
    assert.match(infected.heads, /^HTTP\/1\.1 403 Forbidden/);
    // An appliance reads ISTag from OPTIONS and keeps it with each file it scanned.
    const appliance = new RawIcapConnection(svc.icapPort);
    t.after(() => appliance.close());
    appliance.write('OPTIONS icap://127.0.0.1/avscan ICAP/1.0\r\nHost: 127.0.0.1\r\n\r\n');
    const tag = (await appliance.response()).headers.get('istag');
    const file = randomContent(100_000);
    appliance.write(Buffer.concat([respmod('avscan', file, { Allow: '204' }), chunked(file)]));
    const scanned = await appliance.response();
    assert.equal(scanned.status, 204);
    assert.equal(scanned.headers.get('istag'), tag);
  });

  test('broken framing gets 400 and the connection closes; an unknown method 501', async (t) => {
    const svc = await buildIcapService(t, clamd.socket);
    const cases: Array<[string, Buffer | string, number]> = [
      ['not ICAP at all', 'GET / HTTP/1.1\r\nHost: x\r\n\r\n', 400],
      ['an unknown method', 'PATCH icap://127.0.0.1/avscan ICAP/1.0\r\n\r\n', 501],
      [
        'no Encapsulated header',
        'RESPMOD icap://127.0.0.1/avscan ICAP/1.0\r\nHost: x\r\n\r\n',
        400,
      ],
      [
        'offsets that do not match the heads',
        Buffer.concat([
          Buffer.from(
            'RESPMOD icap://127.0.0.1/avscan ICAP/1.0\r\nEncapsulated: res-hdr=0, res-body=10\r\n\r\n',
          ),
          Buffer.from(httpResponseHead(5)),
        ]),
        400,
      ],
      [
        'offsets out of order',
        'RESPMOD icap://127.0.0.1/avscan ICAP/1.0\r\nEncapsulated: res-hdr=40, req-hdr=0, res-body=80\r\n\r\n',
        400,
      ],
      [
        'a chunk size that is not hexadecimal',
        Buffer.concat([
          respmod('avscan', Buffer.from('hello')),
          Buffer.from('zz\r\nhello\r\n0\r\n\r\n'),
        ]),
        400,
      ],
      [
        'a chunk longer than its size',
        Buffer.concat([
          respmod('avscan', Buffer.from('hello')),
          Buffer.from('3\r\nhello\r\n0\r\n\r\n'),
        ]),
        400,
      ],
      [
        'a chunk size beyond 8 hex digits',
        Buffer.concat([respmod('avscan', Buffer.from('hello')), Buffer.from('1000000000\r\n')]),
        400,
      ],
      [
        'a head over 64 KiB',
        `RESPMOD icap://127.0.0.1/avscan ICAP/1.0\r\nX-Long: ${'a'.repeat(70_000)}\r\n\r\n`,
        400,
      ],
    ];
    for (const [what, request, status] of cases) {
      const connection = new RawIcapConnection(svc.icapPort);
      t.after(() => connection.close());
      connection.write(request);
      const answer = await connection.response();
      assert.equal(answer.status, status, what);
      assert.ok((answer.headers.get('x-assay-error') ?? '').length > 0, `${what}: says why`);
      await connection.closedByServer();
    }
  });

  test('the engine down: an ICAP error, never a pass, with or without 204', async (t) => {
    const svc = await buildIcapService(t, '/nonexistent/clamd.sock');
    const content = randomContent(10_000);
    for (const headers of [{ Allow: '204' }, {}] as Array<Record<string, string>>) {
      const connection = new RawIcapConnection(svc.icapPort);
      t.after(() => connection.close());
      connection.write(Buffer.concat([respmod('avscan', content, headers), chunked(content)]));
      const answer = await connection.response();
      assert.equal(answer.status, 503, JSON.stringify(headers));
      assert.equal(answer.body, null, 'no content is sent back');
      assert.match(answer.headers.get('x-assay-error') ?? '', /malware engine could not scan/);
    }
  });

  test('content over the size limit is blocked, or passed with a header where the operator says so', async (t) => {
    const content = randomContent(5000);
    const blocking = await buildIcapService(t, clamd.socket, { ASSAY_MAX_FILE_SIZE: '4096' });
    const blocked = new RawIcapConnection(blocking.icapPort);
    t.after(() => blocked.close());
    blocked.write(
      Buffer.concat([respmod('avscan', content, { Allow: '204' }), chunked(content, 1000)]),
    );
    const refusal = await blocked.response();
    assert.equal(refusal.status, 200);
    assert.match(refusal.heads, /^HTTP\/1\.1 403 Forbidden/);
    assert.match(refusal.headers.get('x-assay-unscanned') ?? '', /too large.*blocked/);

    const passing = await buildIcapService(t, clamd.socket, {
      ASSAY_MAX_FILE_SIZE: '4096',
      ASSAY_ICAP_OVERSIZE: 'pass',
    });
    const allowed = new RawIcapConnection(passing.icapPort);
    t.after(() => allowed.close());
    allowed.write(
      Buffer.concat([respmod('avscan', content, { Allow: '204' }), chunked(content, 1000)]),
    );
    const passed = await allowed.response();
    assert.equal(passed.status, 204);
    assert.match(passed.headers.get('x-assay-unscanned') ?? '', /too large.*passed unscanned/);
    const echoed = new RawIcapConnection(passing.icapPort);
    t.after(() => echoed.close());
    echoed.write(Buffer.concat([respmod('avscan', content), chunked(content, 1000)]));
    const whole = await echoed.response();
    assert.equal(whole.status, 200);
    assert.equal(whole.body?.toString('hex'), content.toString('hex'), 'all of it, unmodified');
    // Counted once the answer is sent and its copy removed.
    const passedCount =
      'assay_icap_requests_total{method="RESPMOD",service="avscan",outcome="oversize-passed"} 2';
    await waitUntil('both passes counted', async () =>
      (await (await fetch(`${passing.url}/metrics`)).text()).split('\n').includes(passedCount),
    );
  });

  test("a key's rate limit and an empty balance are ICAP errors with the reason, never a pass", async (t) => {
    const svc = await buildIcapService(t, clamd.socket, {
      ASSAY_RATE_LIMIT: '1',
      ASSAY_RATE_BURST: '1',
      ASSAY_CREDENTIAL_CACHE_MS: '0',
    });
    const content = randomContent(1000);
    const connection = new RawIcapConnection(svc.icapPort);
    t.after(() => connection.close());
    connection.write(
      Buffer.concat([respmod('avscan', content, { Allow: '204' }), chunked(content)]),
    );
    assert.equal((await connection.response()).status, 204);
    const second = new RawIcapConnection(svc.icapPort);
    t.after(() => second.close());
    second.write(Buffer.concat([respmod('avscan', content, { Allow: '204' }), chunked(content)]));
    const limited = await second.response();
    assert.equal(limited.status, 503);
    assert.match(limited.headers.get('x-assay-error') ?? '', /rate limit/);
    // The nsfw service's key shares the account: no balance left refuses it too.
    const key = await svc.store.apiKeys.find('icap-nsfw');
    assert.ok(key !== null);
    await svc.store.accounts.update(
      key.accountId,
      { enforceBalance: true, balance: 0 },
      new Date().toISOString(),
    );
    const broke = new RawIcapConnection(svc.icapPort);
    t.after(() => broke.close());
    broke.write(Buffer.concat([respmod('nsfw', content, { Allow: '204' }), chunked(content)]));
    const refused = await broke.response();
    assert.equal(refused.status, 500);
    assert.match(refused.headers.get('x-assay-error') ?? '', /balance/);
  });

  test('connections from outside ASSAY_ICAP_ALLOW are closed before a byte is read', async (t) => {
    const svc = await buildIcapService(t, clamd.socket, { ASSAY_ICAP_ALLOW: '10.9.8.0/24' });
    const connection = new RawIcapConnection(svc.icapPort);
    t.after(() => connection.close());
    connection.write('OPTIONS icap://127.0.0.1/avscan ICAP/1.0\r\n\r\n');
    await connection.closedByServer();
    await assert.rejects(connection.response(), /connection closed; received: $/);
    await waitUntil('the refusal counted', async () =>
      /assay_icap_connections_refused_total 1/.test(
        await (await fetch(`${svc.url}/metrics`)).text(),
      ),
    );
  });
});
