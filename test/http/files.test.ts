import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { eicar } from '../../src/engines/test-content.js';
import { randomContent, sha1, uploadForm } from '../helpers/content.js';
import { buildService, useSharedClamd } from '../helpers/service.js';
import { zipStored as zip } from '../helpers/zip.js';

const TESTFILES = '/usr/share/clamav-testfiles';
const clamd = useSharedClamd();

const env = () => ({ ASSAY_CLAMD: clamd.socket });

async function upload(
  url: string,
  auth: string,
  content: Buffer | string,
  fields: Record<string, string> = {},
  version = 'v2.2',
) {
  const response = await fetch(`${url}/${version}/files`, {
    method: 'POST',
    headers: { authorization: auth },
    body: uploadForm(content, fields),
  });
  return { response, body: (await response.json()) as Record<string, unknown> };
}

describe('POST /files scans with the real clamd', () => {
  test('EICAR gives exactly the eicar finding', async (t) => {
    const svc = await buildService(t, env());
    const { response, body } = await upload(svc.url, svc.auth, eicar());
    assert.equal(response.status, 201);
    assert.deepEqual(body.findings, ['content.malicious.eicar-test-signature']);
    assert.equal(body.checksum, sha1(eicar()));
    assert.equal(body.content_length, 68);
    assert.equal(body.content_type, 'text/plain');
  });

  test('EICAR with a trailing newline and embedded in text is found', async (t) => {
    const svc = await buildService(t, env());
    for (const content of [`${eicar()}\n`, `some text before ${eicar()} and after`]) {
      const { body } = await upload(svc.url, svc.auth, content);
      assert.deepEqual(body.findings, ['content.malicious.eicar-test-signature'], content);
    }
  });

  test('EICAR inside a zip inside a zip gives exactly the eicar finding', async (t) => {
    const svc = await buildService(t, env());
    const inner = zip([{ name: 'eicar.com', data: Buffer.from(eicar()) }]);
    const outer = zip([
      { name: 'readme.txt', data: Buffer.from('nothing to see') },
      { name: 'inner.zip', data: inner },
    ]);
    const { response, body } = await upload(svc.url, svc.auth, outer);
    assert.equal(response.status, 201);
    assert.deepEqual(body.findings, ['content.malicious.eicar-test-signature']);
    assert.equal(body.content_type, 'application/zip');
  });

  test('an archive nested past the engine limits is reported, never passed as clean', async (t) => {
    const svc = await buildService(t, env());
    let archive: Buffer = Buffer.from('harmless text at the bottom');
    for (let depth = 0; depth < 20; depth++) {
      archive = zip([{ name: `level${depth}.zip`, data: archive }]);
    }
    const { response, body } = await upload(svc.url, svc.auth, archive);
    assert.equal(response.status, 201);
    assert.deepEqual(body.findings, ['content.malicious.heuristics.limits.exceeded.maxrecursion']);
  });

  test('clean random content gives no findings, and the checksum is the SHA-1 of the bytes', async (t) => {
    const svc = await buildService(t, env());
    const content = randomContent(256 * 1024);
    const { response, body } = await upload(svc.url, svc.auth, content);
    assert.equal(response.status, 201);
    assert.deepEqual(body.findings, []);
    assert.equal(body.checksum, sha1(content));
    assert.equal(body.content_length, content.length);
    assert.match(String(body.id), /^[0-9a-f]{32}$/);
    assert.match(String(body.creation_date), /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
  });

  test('the local test file sample is flagged', async (t) => {
    const svc = await buildService(t, env());
    const sample = await fetch(`${svc.url}/static/samples/malware`);
    const { body } = await upload(svc.url, svc.auth, Buffer.from(await sample.arrayBuffer()));
    assert.deepEqual(body.findings, ['content.malicious.local-test-file']);
  });

  test('every clamav-testfiles sample is flagged', async (t) => {
    const svc = await buildService(t, env());
    const names = readdirSync(TESTFILES);
    assert.ok(names.length >= 40, `expected the Debian samples in ${TESTFILES}`);
    for (const name of names) {
      const { response, body } = await upload(
        svc.url,
        svc.auth,
        readFileSync(join(TESTFILES, name)),
      );
      assert.equal(response.status, 201, name);
      const findings = body.findings as string[];
      assert.equal(findings.length, 1, `${name}: ${JSON.stringify(findings)}`);
      assert.match(findings[0] ?? '', /^content\.malicious\./, name);
    }
  });

  test('detected media types', async (t) => {
    const svc = await buildService(t, env());
    const cases: Array<[Buffer | string, string]> = [
      ['plain words of text\n', 'text/plain'],
      [readFileSync(join(TESTFILES, 'clam.pdf')), 'application/pdf'],
      [readFileSync(join(TESTFILES, 'clam.exe')), 'application/x-msdownload'],
      [zip([{ name: 'a.txt', data: Buffer.from('hello') }]), 'application/zip'],
    ];
    for (const [content, type] of cases) {
      const { body } = await upload(svc.url, svc.auth, content);
      assert.equal(body.content_type, type);
    }
  });
});

describe('results persist and are read back', () => {
  test('201 with an absolute Location; GET answers the same result without Location', async (t) => {
    const svc = await buildService(t, env());
    const { response, body } = await upload(svc.url, svc.auth, 'hello');
    const location = response.headers.get('location');
    assert.equal(location, `${svc.url}/v2.2/files/${body.id}`);
    const read = await fetch(location ?? '', { headers: { authorization: svc.auth } });
    assert.equal(read.status, 200);
    assert.equal(read.headers.get('location'), null);
    assert.deepEqual(await read.json(), body);
  });

  test('ASSAY_PUBLIC_URL is the base of Location', async (t) => {
    const svc = await buildService(t, { ...env(), ASSAY_PUBLIC_URL: 'https://scan.example.com/' });
    const { response, body } = await upload(svc.url, svc.auth, 'hello', {}, 'v2.1');
    assert.equal(
      response.headers.get('location'),
      `https://scan.example.com/v2.1/files/${body.id}`,
    );
  });

  test('metadata round trip on v2.1 and v2.2, absent on v2.0', async (t) => {
    const svc = await buildService(t, env());
    const fields = {
      'metadata[ order id ]': '42',
      'metadata[a-b_c.d:e,f;g!h?]': 'odd key',
      'metadata[__proto__]': 'just data',
      callback: 'https://example.com/hook',
    };
    for (const version of ['v2.1', 'v2.2']) {
      const { body } = await upload(svc.url, svc.auth, 'hello', fields, version);
      const expected = {
        'order id': '42',
        'a-b_c.d:e,f;g!h?': 'odd key',
        ['__proto__']: 'just data',
      };
      assert.deepEqual(body.metadata, JSON.parse(JSON.stringify(expected)));
      const read = await fetch(`${svc.url}/${version}/files/${body.id}`, {
        headers: { authorization: svc.auth },
      });
      assert.deepEqual(((await read.json()) as Record<string, unknown>).metadata, body.metadata);
    }
    const { body } = await upload(svc.url, svc.auth, 'hello', fields, 'v2.0');
    assert.equal('metadata' in body, false);
    const noFields = await upload(svc.url, svc.auth, 'hello', {}, 'v2.1');
    assert.deepEqual(noFields.body.metadata, {});
  });

  test('metadata given before the file part is kept too', async (t) => {
    const svc = await buildService(t, env());
    const form = new FormData();
    form.append('metadata[first]', 'yes');
    form.append('file', new Blob(['hello']), 'x.txt');
    form.append('metadata[last]', 'also');
    const response = await fetch(`${svc.url}/v2.2/files`, {
      method: 'POST',
      headers: { authorization: svc.auth },
      body: form,
    });
    assert.deepEqual(((await response.json()) as Record<string, unknown>).metadata, {
      first: 'yes',
      last: 'also',
    });
  });

  test("another account's file id answers 404", async (t) => {
    const svc = await buildService(t, env());
    const { body } = await upload(svc.url, svc.auth, 'hello');
    const other = await svc.createAccountKey();
    const read = await fetch(`${svc.url}/v2.2/files/${body.id}`, {
      headers: { authorization: other.auth },
    });
    assert.equal(read.status, 404);
    assert.equal(typeof ((await read.json()) as Record<string, unknown>).error, 'string');
  });

  test('results survive a restart of the service', async (t) => {
    const svc = await buildService(t, env());
    const { body } = await upload(svc.url, svc.auth, eicar());
    await svc.service.stop();
    const again = await buildService(t, { ...env(), ASSAY_DATA_DIR: svc.dataDir });
    const read = await fetch(`${again.url}/v2.2/files/${body.id}`, {
      headers: { authorization: svc.auth },
    });
    assert.deepEqual(await read.json(), body);
  });
});
