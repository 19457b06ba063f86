import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { eicar } from '../../src/engines/test-content.js';
import { randomContent } from '../helpers/content.js';
import { buildIcapService } from '../helpers/icap.js';
import { type LocalServer, startLocalServer } from '../helpers/local-server.js';
import { startSharedClamd } from '../helpers/service.js';
import { getThroughProxy, startSquid } from '../helpers/squid.js';

// A real Squid (Debian's 5.7) as a forward proxy with Assay as its RESPMOD service, bypass off:
// what a browser behind it gets.

let clamd: Awaited<ReturnType<typeof startSharedClamd>>;
let origin: LocalServer;
const clean = randomContent(60 * 1024);
/** Over Squid 5.7's 64 KiB virgin-body buffer. */
const large = randomContent(1024 * 1024);
/** Sent slowly, in pieces, so that clamd can go away while it arrives. */
const slow = randomContent(48 * 1024);
let slowStarted: () => void = () => undefined;

function sha256(data: Buffer): string {
  return createHash('sha256').update(data).digest('hex');
}

before(async () => {
  clamd = await startSharedClamd();
  origin = await startLocalServer(async (request, response) => {
    if (request.url === '/eicar.com') {
      response.writeHead(200, { 'content-type': 'application/octet-stream' });
      response.end(eicar());
    } else if (request.url === '/clean.bin') {
      response.writeHead(200, { 'content-type': 'application/octet-stream' });
      response.end(clean);
    } else if (request.url === '/large.bin') {
      response.writeHead(200, {
        'content-type': 'application/octet-stream',
        'content-length': String(large.length),
      });
      response.end(large);
    } else if (request.url === '/slow.bin') {
      response.writeHead(200, {
        'content-type': 'application/octet-stream',
        'content-length': String(slow.length),
      });
      for (let offset = 0; offset < slow.length; offset += 8 * 1024) {
        response.write(slow.subarray(offset, offset + 8 * 1024));
        if (offset === 0) slowStarted();
        await sleep(150);
      }
      response.end();
    } else {
      response.writeHead(404);
      response.end();
    }
  });
});
after(async () => {
  await origin.close();
  await clamd.stop();
});

describe('Squid with Assay as its ICAP service', () => {
  test('malware gets the block page; clean content passes byte for byte', async (t) => {
    const svc = await buildIcapService(t, clamd.socket);
    const squid = await startSquid(t, `icap://127.0.0.1:${svc.icapPort}/avscan`);
    const blocked = await getThroughProxy(squid.proxy, `${origin.url}/eicar.com`);
    assert.equal(blocked.status, 403, squid.log());
    assert.match(blocked.body.toString(), /content\.malicious\.eicar-test-signature/);
    assert.equal(blocked.body.includes(eicar()), false, 'the content itself never passes');
    const passed = await getThroughProxy(squid.proxy, `${origin.url}/clean.bin`);
    assert.equal(passed.status, 200, squid.log());
    assert.equal(sha256(passed.body), sha256(clean));
  });

  test('clamd going away during a fetch fails closed, and Squid uses Assay again once it is back', async (t) => {
    const svc = await buildIcapService(t, clamd.socket);
    const squid = await startSquid(t, `icap://127.0.0.1:${svc.icapPort}/avscan`);
    const started = new Promise<void>((resolve) => {
      slowStarted = resolve;
    });
    const fetching = getThroughProxy(squid.proxy, `${origin.url}/slow.bin`);
    await started;
    await clamd.clamd.stop();
    const failed = await fetching;
    assert.equal(failed.status, 500, 'Squid answers its ICAP error page');
    assert.match(failed.body.toString(), /ICAP/);
    assert.equal(
      failed.body.includes(slow.subarray(0, 64)),
      false,
      'none of the content reached the client',
    );
    await clamd.clamd.start();
    const passed = await getThroughProxy(squid.proxy, `${origin.url}/clean.bin`);
    assert.equal(passed.status, 200, squid.log());
    assert.equal(sha256(passed.body), sha256(clean));
    const again = await getThroughProxy(squid.proxy, `${origin.url}/eicar.com`);
    assert.equal(again.status, 403);
  });

  // Debian's Squid 5.7 has Squid's bug 5352 (fixed upstream in 2025): once its 64 KiB buffer
  // toward the ICAP service is full, its read from the origin waits for the client side, which in
  // RESPMOD gets nothing until the service answers. A service that answers only after the
  // verdict, as Assay does, never gets the rest (c-icap's virus_scan stalls the same way; its echo
  // service, which streams the body back at once, does not). Assay keeps the content: the
  // transfer ends, after ASSAY_REQUEST_IDLE_TIMEOUT, in Squid's ICAP error page (docs/ICAP.md,
  // "Known limits").
  test("a body past Squid 5.7's 64 KiB buffer never reaches the client unscanned", async (t) => {
    const svc = await buildIcapService(t, clamd.socket, { ASSAY_REQUEST_IDLE_TIMEOUT: '2' });
    const squid = await startSquid(t, `icap://127.0.0.1:${svc.icapPort}/avscan`);
    const answer = await getThroughProxy(squid.proxy, `${origin.url}/large.bin`);
    assert.notEqual(answer.status, 200, 'never the unscanned content');
    assert.equal(answer.body.includes(large.subarray(0, 64)), false);
    assert.match(answer.body.toString(), /ICAP/);
  });
});
