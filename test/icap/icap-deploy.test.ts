import assert from 'node:assert/strict';
import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { eicar } from '../../src/engines/test-content.js';
import { randomContent } from '../helpers/content.js';
import {
  buildIcapService,
  chunked,
  httpResponseHead,
  icapClient,
  icapRequest,
  RawIcapConnection,
} from '../helpers/icap.js';
import { serveIcap } from '../helpers/icap-serve.js';
import { tempDir, useSharedClamd } from '../helpers/service.js';
import { writeSelfSignedCertificate } from '../helpers/tls.js';

// The ICAP listener as deployed: ICAPS beside plain ICAP, and several processes on one port.

const clamd = useSharedClamd();

describe('ICAP deployments', () => {
  test('ICAPS on a port of its own, with the HTTP listener’s certificate; plain ICAP keeps working', async (t) => {
    const dir = tempDir('assay-icaps-');
    t.after(() => rmSync(dir, { recursive: true, force: true }));
    const { cert, key } = writeSelfSignedCertificate(dir);
    const svc = await buildIcapService(t, clamd.socket, {
      ASSAY_TLS_CERT: cert,
      ASSAY_TLS_KEY: key,
      ASSAY_ICAPS_PORT: '0',
    });
    const icaps = svc.service.icap.icaps;
    assert.match(icaps ?? '', /^icaps:\/\/127\.0\.0\.1:\d+$/);
    const tlsPort = Number(/:(\d+)$/.exec(icaps ?? '')?.[1]);
    const malware = join(dir, 'eicar.com');
    writeFileSync(malware, eicar());
    const overTls = await icapClient(
      tlsPort,
      'avscan',
      ['-f', malware, '-resp', 'http://files.example/eicar.com'],
      { tls: true },
    );
    assert.equal(overTls.status, 200, overTls.stdout);
    assert.match(overTls.headers.get('x-infection-found') ?? '', /eicar/);
    const plain = await icapClient(svc.icapPort, 'avscan', []);
    assert.equal(plain.status, 200, plain.stdout);
    // A plain client on the TLS port gets nothing it could mistake for an answer.
    const confused = new RawIcapConnection(tlsPort);
    t.after(() => confused.close());
    confused.write('OPTIONS icap://127.0.0.1/avscan ICAP/1.0\r\n\r\n');
    await assert.rejects(confused.response());
  });

  test('under --processes every process serves ICAP on the one port, with the same ISTag', async (t) => {
    const dataDir = tempDir();
    t.after(() => rmSync(dataDir, { recursive: true, force: true }));
    const { serve, port } = await serveIcap(t, dataDir, clamd.socket, {}, ['--processes', '2']);
    const tags = new Set<string>();
    const content = Buffer.from(eicar());
    const clean = randomContent(2000);
    // Connections are handed to the processes in turn: enough of them reach both.
    for (let round = 0; round < 8; round++) {
      const connection = new RawIcapConnection(port);
      t.after(() => connection.close());
      connection.write('OPTIONS icap://127.0.0.1/avscan ICAP/1.0\r\n\r\n');
      const options = await connection.response();
      assert.equal(options.status, 200);
      tags.add(options.headers.get('istag') ?? '');
      const body = round % 2 === 0 ? content : clean;
      connection.write(
        Buffer.concat([
          icapRequest('RESPMOD', 'avscan', {
            responseHead: httpResponseHead(body.length),
            body: true,
            headers: { Allow: '204' },
          }),
          chunked(body),
        ]),
      );
      const answer = await connection.response();
      assert.equal(answer.status, round % 2 === 0 ? 200 : 204);
    }
    assert.equal(tags.size, 1, `one ISTag: ${[...tags].join(', ')}`);
    const processes = new Set(
      serve.records.filter((record) => record.msg === 'ICAP listening').map((r) => r.pid),
    );
    assert.equal(processes.size, 2, 'both processes listen');
  });

  test("a body's size does not show in the service's memory", async (t) => {
    const dataDir = tempDir();
    t.after(() => rmSync(dataDir, { recursive: true, force: true }));
    const { port, peakRss } = await serveIcap(t, dataDir, clamd.socket, {
      // The shared clamd takes streams of up to 200 MiB.
      ASSAY_MAX_FILE_SIZE: String(200 * 1024 * 1024),
    });
    const send = async (size: number) => {
      const path = join(dataDir, `body-${size}`);
      writeFileSync(path, randomContent(size));
      // Without 204: the body comes back too, from the copy on disk.
      const run = await icapClient(port, 'avscan', [
        '-f',
        path,
        '-resp',
        'http://files.example/big.bin',
        '-no204',
        '-nopreview',
      ]);
      assert.equal(run.status, 200, run.stdout);
      assert.equal(run.output?.length, size);
      rmSync(path);
    };
    // V8's heap settles to a stream of data within a body or two: its young generation grows up
    // to --max-semi-space-size (3 x 16 MB), the old one up to --initial-old-space-size before its
    // first full collection, and promoted chunks wait for one. That is tens of MB that come early
    // or late by timing (a loaded machine), so the bodies differ by more than it can: a service
    // that held the body would grow by 128 MiB or more here.
    for (let round = 0; round < 2; round++) await send(64 * 1024 * 1024);
    const settled = peakRss();
    await send(192 * 1024 * 1024);
    const grown = peakRss() - settled;
    assert.ok(
      grown < 64 * 1024 * 1024,
      `peak RSS grew by ${Math.round(grown / 1048576)} MiB (from ${Math.round(settled / 1048576)} MiB) for a body 3 times the size`,
    );
  });
});
