import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { rmSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { eicar } from '../../src/engines/test-content.js';
import { randomContent } from '../helpers/content.js';
import { buildIcapService } from '../helpers/icap.js';
import { serveIcap } from '../helpers/icap-serve.js';
import { type LocalServer, startLocalServer } from '../helpers/local-server.js';
import { startSharedClamd, tempDir } from '../helpers/service.js';
import { getThroughProxy, startSquid } from '../helpers/squid.js';

// A real Squid (Debian 13's, see test/helpers/squid.ts) as a forward proxy with Assay as its
// RESPMOD service, bypass off: what a browser behind it gets.

let clamd: Awaited<ReturnType<typeof startSharedClamd>>;
let origin: LocalServer;
const clean = randomContent(60 * 1024);
/** Bodies far past Squid's 64 KiB buffer toward the service, by size. */
const large = new Map([50, 150].map((mib) => [mib, randomContent(mib * 1024 * 1024)]));
/** The large body `/large-<MiB>.bin` names, if any. */
const largeBody = (url = '') => large.get(Number(/^\/large-(\d+)\.bin$/.exec(url)?.[1]));
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
    } else if (largeBody(request.url) !== undefined) {
      const body = largeBody(request.url) as Buffer;
      response.writeHead(200, {
        'content-type': 'application/octet-stream',
        'content-length': String(body.length),
      });
      response.end(body);
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

  test("50 MiB of clean content passes byte for byte, and its size does not show in Assay's memory", async (t) => {
    const dataDir = tempDir();
    t.after(() => rmSync(dataDir, { recursive: true, force: true }));
    // Assay as a process of its own, so that its memory is not the test's (which holds the
    // bodies); a stall would end in Squid's ICAP error page after 10 s idle.
    const assay = await serveIcap(t, dataDir, clamd.socket, {
      ASSAY_MAX_FILE_SIZE: String(200 * 1024 * 1024),
      ASSAY_REQUEST_IDLE_TIMEOUT: '10',
    });
    const squid = await startSquid(t, `icap://127.0.0.1:${assay.port}/avscan`);
    const fetchLarge = async (mib: number) => {
      const answer = await getThroughProxy(squid.proxy, `${origin.url}/large-${mib}.bin`);
      assert.equal(answer.status, 200, squid.log());
      assert.equal(answer.body.length, mib * 1024 * 1024);
      assert.equal(sha256(answer.body), sha256(large.get(mib) ?? Buffer.alloc(0)));
    };
    // V8's heap settles within a body or two (icap-deploy.test.ts says why); then a body three
    // times the size: a service that held it would grow by 150 MiB.
    await fetchLarge(50);
    await fetchLarge(50);
    const settled = assay.peakRss();
    await fetchLarge(150);
    const grown = assay.peakRss() - settled;
    assert.ok(
      grown < 50 * 1024 * 1024,
      `peak RSS grew by ${Math.round(grown / 1048576)} MiB (from ${Math.round(settled / 1048576)} MiB) for a body 3 times the size`,
    );
    const blocked = await getThroughProxy(squid.proxy, `${origin.url}/eicar.com`);
    assert.equal(
      blocked.status,
      403,
      `the same Squid and Assay still block malware: ${/<body id=(\w+)/.exec(blocked.body.toString())?.[1]}`,
    );
  });
});
