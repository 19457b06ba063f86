import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { eicar } from '../../src/engines/test-content.js';
import { packageRoot } from '../../src/paths.js';
import { randomContent } from '../helpers/content.js';
import { buildIcapService, type IcapService, icapClient } from '../helpers/icap.js';
import { tempDir, useSharedClamd } from '../helpers/service.js';

// What Debian's c-icap-client (package c-icap, what Nextcloud-like and proxy set-ups are checked
// with) gets from Assay's ICAP listener: OPTIONS, REQMOD and RESPMOD, preview on and off, 204
// allowed and not, clean, malware and an image for the NSFW service, bodies of 0 B to 50 MiB.

const imageSample = readFileSync(join(packageRoot(), 'static/samples/image.jpg'));
const clamd = useSharedClamd();

function file(content: Buffer | string, name = 'content.bin'): string {
  const path = join(tempDir('assay-icap-in-'), name);
  writeFileSync(path, content);
  return path;
}

function sha256(data: Buffer): string {
  return createHash('sha256').update(data).digest('hex');
}

async function resultOf(svc: IcapService, service: string, id: string | undefined) {
  assert.match(id ?? '', /^[0-9a-f]{32}$/, 'the answer names its result');
  const response = await fetch(`${svc.url}/v2.2/files/${id}`, {
    headers: { authorization: svc.icapAuth[service] as string },
  });
  assert.equal(response.status, 200);
  return (await response.json()) as {
    findings: string[];
    content_length: number;
    metadata: object;
  };
}

describe('ICAP with c-icap-client', () => {
  test('OPTIONS tells what the service does; an unknown service is 404', async (t) => {
    const svc = await buildIcapService(t, clamd.socket);
    const options = await icapClient(svc.icapPort, 'avscan', []);
    assert.equal(options.status, 200, options.stdout);
    assert.equal(options.headers.get('methods'), 'RESPMOD, REQMOD');
    const tag = options.headers.get('istag') ?? '';
    assert.match(tag, /^"[^"]+"$/, 'ISTag is quoted');
    assert.ok(Buffer.byteLength(tag) <= 32, `ISTag ${tag} fits in 32 bytes`);
    assert.equal(options.headers.get('max-connections'), String(svc.config.accountSyncConcurrency));
    assert.equal(options.headers.get('options-ttl'), '60');
    assert.match(options.headers.get('allow') ?? '', /\b204\b/);
    assert.match(options.headers.get('preview') ?? '', /^\d+$/);
    assert.equal(options.headers.get('transfer-preview'), '*');
    // Every service serves the same signature set: one tag.
    const nsfw = await icapClient(svc.icapPort, 'nsfw', []);
    assert.equal(nsfw.headers.get('istag'), tag);
    const unknown = await icapClient(svc.icapPort, 'nosuch', []);
    assert.equal(unknown.status, 404, unknown.stdout);
  });

  test('RESPMOD: clean is 204 or the unmodified body; malware is a 403 page with the headers clients read', async (t) => {
    const svc = await buildIcapService(t, clamd.socket);
    const clean = randomContent(5000);
    const cleanFile = file(clean);
    const malware = file(eicar(), 'eicar.com');
    for (const options of [
      [],
      ['-nopreview'],
      ['-no204'],
      ['-no204', '-nopreview'],
      ['-206', '-no204'],
    ]) {
      const what = `c-icap-client ${options.join(' ')}`;
      const passed = await icapClient(svc.icapPort, 'avscan', [
        '-f',
        cleanFile,
        '-resp',
        'http://files.example/clean.bin',
        ...options,
      ]);
      if (options.includes('-no204')) {
        assert.equal(passed.status, options.includes('-206') ? 206 : 200, what);
        assert.equal(
          passed.output?.toString('hex'),
          clean.toString('hex'),
          `${what}: the body comes back unmodified`,
        );
      } else {
        assert.equal(passed.status, 204, what);
      }
      const result = await resultOf(svc, 'avscan', passed.headers.get('x-assay-result-id'));
      assert.deepEqual(result.findings, []);
      assert.equal(result.content_length, clean.length);

      const blocked = await icapClient(svc.icapPort, 'avscan', [
        '-f',
        malware,
        '-resp',
        'http://files.example/eicar.com',
        ...options,
      ]);
      assert.equal(blocked.status, 200, what);
      assert.match(blocked.httpHead, /^HTTP\/1\.1 403 Forbidden/, what);
      assert.match(blocked.output?.toString() ?? '', /content\.malicious\.eicar-test-signature/);
      assert.notEqual(blocked.output?.toString(), eicar(), 'the content itself never passes');
      assert.equal(
        blocked.headers.get('x-infection-found'),
        'Type=0; Resolution=2; Threat=content.malicious.eicar-test-signature;',
      );
      assert.equal(blocked.headers.get('x-virus-id'), 'content.malicious.eicar-test-signature');
      assert.match(
        blocked.headers.get('x-violations-found') ?? '',
        /^1\neicar\.com\ncontent\.malicious\.eicar-test-signature\n/,
      );
      const flagged = await resultOf(svc, 'avscan', blocked.headers.get('x-assay-result-id'));
      assert.deepEqual(flagged.findings, ['content.malicious.eicar-test-signature']);
      assert.deepEqual(flagged.metadata, { icap_service: 'avscan', icap_method: 'RESPMOD' });
    }
  });

  test('REQMOD: an upload is passed or replaced by a 403 page', async (t) => {
    const svc = await buildIcapService(t, clamd.socket);
    const clean = randomContent(70_000);
    const passed = await icapClient(svc.icapPort, 'avscan', [
      '-f',
      file(clean),
      '-req',
      'http://files.example/upload',
      '-method',
      'POST',
      '-no204',
    ]);
    assert.equal(passed.status, 200, passed.stdout);
    assert.match(passed.httpHead, /^POST http:\/\/files\.example\/upload HTTP/);
    assert.equal(sha256(passed.output ?? Buffer.alloc(0)), sha256(clean));
    const blocked = await icapClient(svc.icapPort, 'avscan', [
      '-f',
      file(eicar()),
      '-req',
      'http://files.example/upload',
      '-method',
      'POST',
    ]);
    assert.equal(blocked.status, 200, blocked.stdout);
    assert.match(blocked.httpHead, /^HTTP\/1\.1 403 Forbidden/);
    assert.match(
      blocked.headers.get('x-infection-found') ?? '',
      /Threat=content\.malicious\.eicar/,
    );
    const flagged = await resultOf(svc, 'avscan', blocked.headers.get('x-assay-result-id'));
    assert.deepEqual(flagged.metadata, { icap_service: 'avscan', icap_method: 'REQMOD' });
  });

  test('the image sample is blocked by the NSFW service and passed by the malware-only one', async (t) => {
    const svc = await buildIcapService(t, clamd.socket);
    const image = file(imageSample, 'photo.jpg');
    const args = ['-f', image, '-resp', 'http://files.example/photo.jpg'];
    const nsfw = await icapClient(svc.icapPort, 'nsfw', args);
    assert.equal(nsfw.status, 200, nsfw.stdout);
    assert.match(nsfw.httpHead, /403 Forbidden/);
    assert.equal(nsfw.headers.get('x-virus-id'), 'content.image.nsfw.nudity');
    const avscan = await icapClient(svc.icapPort, 'avscan', args);
    assert.equal(avscan.status, 204, avscan.stdout);
  });

  test('bodies of 0 B, 1 B, 1 MiB and 50 MiB pass with 204 allowed, and come back byte for byte without', async (t) => {
    const svc = await buildIcapService(t, clamd.socket);
    for (const size of [0, 1, 1024 * 1024, 50 * 1024 * 1024]) {
      const content = randomContent(size);
      const path = file(content);
      const args = ['-f', path, '-resp', `http://files.example/${size}.bin`];
      const allowed = await icapClient(svc.icapPort, 'avscan', args);
      assert.equal(allowed.status, 204, `${size} B with 204 allowed: ${allowed.stdout}`);
      if (size > 0) await resultOf(svc, 'avscan', allowed.headers.get('x-assay-result-id'));
      // Without a preview: a body that fits in one ends in it, where 204 is always allowed.
      const echoed = await icapClient(svc.icapPort, 'avscan', [...args, '-no204', '-nopreview']);
      assert.equal(echoed.status, 200, `${size} B without 204`);
      assert.equal(echoed.output?.length ?? 0, size);
      assert.equal(sha256(echoed.output ?? Buffer.alloc(0)), sha256(content), `${size} B intact`);
    }
  });
});
