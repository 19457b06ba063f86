import '../helpers/loopback-only.js';
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { randomContent, uploadForm } from '../helpers/content.js';
import { type IdleFlood, idleConnections, loopbackAddresses } from '../helpers/idle-connections.js';
import { rawRequest, requestHead } from '../helpers/raw-http.js';
import { buildService, useSharedClamd } from '../helpers/service.js';

// @run-alone: floods 1,260 idle connections; answers timed (2 s, 5 s)

const clamd = useSharedClamd();

async function until(condition: () => boolean, timeoutMs: number): Promise<boolean> {
  const deadline = performance.now() + timeoutMs;
  while (!condition() && performance.now() < deadline) await sleep(50);
  return condition();
}

function statusCount(answer: string): number {
  return answer.match(/HTTP\/1\.1 200 /g)?.length ?? 0;
}

describe('a flood of idle connections (ASSAY_MAX_CONNECTIONS)', () => {
  test('caps in all and per address; /health/live and an upload from another address still answer; idle sockets closed after the header timeout', async (t) => {
    const svc = await buildService(t, {
      ASSAY_CLAMD: clamd.socket,
      ASSAY_MAX_CONNECTIONS: '200',
      ASSAY_MAX_CONNECTIONS_PER_ADDRESS: '50',
      ASSAY_HEADER_TIMEOUT: '5',
    });
    // Closed before the service stops (its hooks run first): it would wait for open sockets.
    const floods: IdleFlood[] = [];
    try {
      // One address: 60 connections, 10 over its cap, closed at once.
      const one = idleConnections(svc.url, ['127.0.1.1'], 60);
      floods.push(one);
      await one.settled;
      await until(() => one.open() <= 50, 2_500);
      assert.equal(one.open(), 50, 'connections of one address open, cap 50');
      // 20 more addresses × 60: 10 of each refused by the per-address cap, and the total held at
      // 200 by closing the oldest idle connections of the busiest addresses.
      const flood = idleConnections(svc.url, loopbackAddresses(20), 60);
      floods.push(flood);
      await flood.settled;
      // The server accepts the backlog and closes what is over the caps in a moment; the header
      // timeout is further off, so exactly the cap stays open (not fewer).
      const total = () => one.open() + flood.open();
      await until(() => total() <= 200, 2_500);
      assert.equal(total(), 200, 'idle connections open, cap 200');
      assert.ok(one.open() < 50, 'the busiest address gave up connections for the others');

      let started = performance.now();
      const live = await fetch(`${svc.url}/health/live`);
      assert.equal(live.status, 200);
      const liveMs = performance.now() - started;
      assert.ok(liveMs < 2_000, `/health/live took ${liveMs} ms`);

      started = performance.now();
      const upload = await fetch(`${svc.url}/v2.2/files`, {
        method: 'POST',
        headers: { authorization: svc.auth },
        body: uploadForm(randomContent(10_000)),
      });
      assert.equal(upload.status, 201, await upload.text());
      const uploadMs = performance.now() - started;
      assert.ok(uploadMs < 5_000, `the upload took ${uploadMs} ms`);

      const allClosed = await until(() => total() === 0, 10_000);
      assert.ok(allClosed, `${total()} idle connections still open after 10 s`);
    } finally {
      for (const flood of floods) flood.close();
    }
  });

  test('a connection that sends its request head in time is served; a kept-alive client is not cut at the header timeout', async (t) => {
    const svc = await buildService(t, { ASSAY_CLAMD: clamd.socket, ASSAY_HEADER_TIMEOUT: '1' });
    // One connection, three requests 0.7 s apart: past the header timeout in all, each in time.
    const request = rawRequest(svc.url, requestHead('GET', '/health/live', {}));
    for (let i = 1; i <= 3; i++) {
      assert.ok(
        await until(() => statusCount(request.received()) === i, 2_000),
        `answer ${i} on the same connection; received: ${request.received()}`,
      );
      await sleep(700);
      if (i < 3) request.send(requestHead('GET', '/health/live', {}));
    }
    assert.equal(request.socket.destroyed, false, 'the connection is still open');
    request.socket.destroy();
  });
});
