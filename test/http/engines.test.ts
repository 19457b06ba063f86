import '../helpers/loopback-only.js';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import type { DetectionCategory } from '../../src/domain/records.js';
import { eicar, LANGUAGE_TEST_MARKER } from '../../src/engines/test-content.js';
import { packageRoot } from '../../src/paths.js';
import { uploadForm } from '../helpers/content.js';
import { drawing, pngBomb } from '../helpers/images.js';
import { randomDataTexts, SCUNTHORPE_SENTENCES } from '../helpers/language-corpus.js';
import {
  buildService,
  credentialsRefreshed,
  type TestService,
  useSharedClamd,
} from '../helpers/service.js';

const clamd = useSharedClamd();
const imageSample = readFileSync(join(packageRoot(), 'static/samples/image.jpg'));

async function upload(url: string, auth: string, content: Buffer | string, path = '/v2.2/files') {
  const response = await fetch(`${url}${path}`, {
    method: 'POST',
    headers: { authorization: auth },
    body: uploadForm(content),
  });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

async function trace(svc: TestService, auth: string, id: string): Promise<string> {
  const response = await fetch(`${svc.url}/v2.2/files/${id}/trace`, {
    headers: { authorization: auth },
  });
  return JSON.stringify(await response.json());
}

async function keyWith(svc: TestService, categories: DetectionCategory[]): Promise<string> {
  await svc.store.apiKeys.update(svc.keyId, { detectionCategories: categories });
  await credentialsRefreshed(svc);
  return svc.auth;
}

describe('engines follow the key’s detection categories', () => {
  test('a key with every category: malware, obscene language and the image sample are flagged', async (t) => {
    const svc = await buildService(t, { ASSAY_CLAMD: clamd.socket, ASSAY_NSFW_WORKERS: '1' });
    const malware = await upload(svc.url, svc.auth, eicar());
    assert.equal(malware.status, 201);
    assert.equal((malware.body.findings as string[]).length, 1);

    const language = await upload(svc.url, svc.auth, 'well what the f*ck is this, you sh1t');
    assert.deepEqual(language.body.findings, ['content.en.language.nsfw.0']);
    const sample = await upload(svc.url, svc.auth, `Sample ${LANGUAGE_TEST_MARKER}\n`);
    assert.deepEqual(sample.body.findings, ['content.en.language.nsfw.0']);
    const image = await upload(svc.url, svc.auth, imageSample);
    assert.deepEqual(image.body.findings, ['content.image.nsfw.nudity']);
    // Longer than the head libmagic sees: the rest, held while the type was detected, still
    // reaches the engine. 2.5 MB of JPEG comment segments (which decoders skip) after its start.
    const comment = Buffer.concat([Buffer.from([0xff, 0xfe, 0xff, 0xff]), Buffer.alloc(65533)]);
    const comments = Array.from({ length: 40 }, () => comment);
    const padded = Buffer.concat([
      imageSample.subarray(0, 2),
      ...comments,
      imageSample.subarray(2),
    ]);
    const long = await upload(svc.url, svc.auth, padded);
    assert.equal(long.status, 201);
    // The pixels lie past the first 1 MiB: decoding them means the engine had all of it.
    assert.match(await trace(svc, svc.auth, String(long.body.id)), /nsfw-image: jpeg 96 x 64: /);

    const clean = await upload(svc.url, svc.auth, await drawing());
    assert.equal(clean.status, 201);
    assert.deepEqual(clean.body.findings, []);
    const lines = await trace(svc, svc.auth, String(clean.body.id));
    assert.match(lines, /engine clamav \(MALWARE\): clean/);
    assert.match(lines, /engine nsfw-image \(NSFW_IMAGE\): nothing found/);
    assert.match(lines, /nsfw-language \(NSFW_LANGUAGE\): does not examine image\/png/);
  });

  test('MALWARE off: EICAR is not looked at by clamd; NSFW engines off: obscenity passes', async (t) => {
    const svc = await buildService(t, { ASSAY_CLAMD: clamd.socket, ASSAY_NSFW_WORKERS: '1' });
    const languageOnly = await keyWith(svc, ['NSFW_LANGUAGE']);
    const noMalware = await upload(svc.url, languageOnly, eicar());
    assert.equal(noMalware.status, 201);
    assert.deepEqual(noMalware.body.findings, []);
    assert.match(
      await trace(svc, languageOnly, String(noMalware.body.id)),
      /clamav \(MALWARE\): not enabled for this key/,
    );
    const rude = await upload(svc.url, languageOnly, 'fuuuuck');
    assert.deepEqual(rude.body.findings, ['content.en.language.nsfw.0']);

    const malwareOnly = await keyWith(svc, ['MALWARE']);
    const noLanguage = await upload(svc.url, malwareOnly, 'fuuuuck');
    assert.deepEqual(noLanguage.body.findings, []);
    assert.doesNotMatch(await trace(svc, malwareOnly, String(noLanguage.body.id)), /nsfw/);
    const noImage = await upload(svc.url, malwareOnly, imageSample);
    assert.deepEqual(noImage.body.findings, []);
  });

  test('a key with no category is refused (403) rather than given an empty verdict', async (t) => {
    const svc = await buildService(t, { ASSAY_CLAMD: clamd.socket });
    const none = await keyWith(svc, []);
    for (const path of ['/v2.2/files', '/v2.2/files/async']) {
      const refused = await upload(svc.url, none, 'hello', path);
      assert.equal(refused.status, 403, path);
      assert.match(String(refused.body.error), /no detection category/);
    }
  });
});

describe('an engine that cannot decide is an error, never a pass', () => {
  test('a corrupt image: 422 when synchronous, an error result when asynchronous', async (t) => {
    const svc = await buildService(t, { ASSAY_CLAMD: clamd.socket, ASSAY_NSFW_WORKERS: '1' });
    const corrupt = Buffer.concat([(await drawing()).subarray(0, 200), Buffer.alloc(300, 7)]);
    const sync = await upload(svc.url, svc.auth, corrupt);
    assert.equal(sync.status, 422);
    assert.match(String(sync.body.error), /NSFW_IMAGE/);
    assert.equal(sync.body.findings, undefined);

    const accepted = await upload(svc.url, svc.auth, corrupt, '/v2.2/files/async');
    assert.equal(accepted.status, 202);
    let result: Record<string, unknown> = {};
    for (let i = 0; i < 200; i++) {
      const response = await fetch(`${svc.url}/v2.2/files/${accepted.body.id}`, {
        headers: { authorization: svc.auth },
      });
      result = (await response.json()) as Record<string, unknown>;
      if (response.status === 200) break; // 404 until the job is done

      await sleep(50);
    }
    assert.match(String(result.error), /NSFW_IMAGE/);
    assert.ok(!Array.isArray(result.findings) || result.findings.length > 0, 'no empty findings');
  });

  test('malware in a corrupt image: the finding is reported, the image engine’s failure traced', async (t) => {
    const svc = await buildService(t, { ASSAY_CLAMD: clamd.socket, ASSAY_NSFW_WORKERS: '1' });
    const auth = await keyWith(svc, ['MALWARE', 'NSFW_IMAGE']);
    // A PNG cut off and padded (sharp cannot decode it), carrying the EICAR string.
    const corrupt = Buffer.concat([
      (await drawing()).subarray(0, 200),
      Buffer.alloc(300, 7),
      Buffer.from(eicar()),
    ]);
    const sync = await upload(svc.url, auth, corrupt);
    assert.equal(sync.status, 201, JSON.stringify(sync.body));
    assert.deepEqual(sync.body.findings, ['content.malicious.eicar-test-signature']);
    assert.equal(sync.body.content_type, 'image/png');
    const lines = await trace(svc, auth, String(sync.body.id));
    assert.match(lines, /engine nsfw-image \(NSFW_IMAGE\): failed/);
    assert.match(lines, /not every engine could examine the content/);

    const accepted = await upload(svc.url, auth, corrupt, '/v2.2/files/async');
    assert.equal(accepted.status, 202);
    let result: Record<string, unknown> = {};
    for (let i = 0; i < 200; i++) {
      const response = await fetch(`${svc.url}/v2.2/files/${accepted.body.id}`, {
        headers: { authorization: auth },
      });
      result = (await response.json()) as Record<string, unknown>;
      if (response.status === 200) break;
      await sleep(50);
    }
    assert.deepEqual(result.findings, ['content.malicious.eicar-test-signature']);
    assert.match(
      await trace(svc, auth, String(accepted.body.id)),
      /engine nsfw-image \(NSFW_IMAGE\): failed/,
    );

    // Without malware, the same failure still leaves the item unexamined.
    const clean = Buffer.concat([(await drawing()).subarray(0, 200), Buffer.alloc(300, 7)]);
    const unexamined = await upload(svc.url, auth, clean);
    assert.equal(unexamined.status, 422);
    assert.equal(unexamined.body.findings, undefined);
  });

  test('a 30,000 x 30,000 PNG bomb is refused, not decoded', async (t) => {
    const svc = await buildService(t, { ASSAY_CLAMD: clamd.socket, ASSAY_NSFW_WORKERS: '1' });
    const refused = await upload(svc.url, svc.auth, pngBomb(30_000, 30_000));
    assert.equal(refused.status, 422);
    assert.match(String(refused.body.error), /NSFW_IMAGE.*pixels/i);
  });
});

describe('NSFW_LANGUAGE over HTTP: words, not pieces of identifiers', () => {
  test('hashes, base64, UUIDs and Scunthorpe words are clean; disguised obscenities are flagged', async (t) => {
    const svc = await buildService(t, { ASSAY_CLAMD: clamd.socket, ASSAY_NSFW_WORKERS: '1' });
    const languageOnly = await keyWith(svc, ['NSFW_LANGUAGE']);
    const innocent = [
      'Build a55c5 of commit 8abeed1 fixed d41b00b7e.',
      ...randomDataTexts(34),
      SCUNTHORPE_SENTENCES.join('\n'),
    ];
    for (const text of innocent) {
      const clean = await upload(svc.url, languageOnly, text);
      assert.equal(clean.status, 201);
      assert.deepEqual(clean.body.findings, [], text.slice(0, 80));
    }
    const disguised: Array<[string, string]> = [
      ['well f u c k that', 'en'],
      ['what a b1tch', 'en'],
      ['oh sh!t, fuuuuck', 'en'],
      ['So eine S c h e i ß e!', 'de'],
      ['¡Qué M13RDA!', 'es'],
      ['Quelle m*rde, ce c0nnard.', 'fr'],
      ['Che ca**o dici, str0nzo?', 'it'],
    ];
    for (const [text, language] of disguised) {
      const flagged = await upload(svc.url, languageOnly, text);
      assert.deepEqual(flagged.body.findings, [`content.${language}.language.nsfw.0`], text);
    }
    const traced = await upload(svc.url, languageOnly, 'Build a55c5, then f u c k.');
    assert.match(
      await trace(svc, languageOnly, String(traced.body.id)),
      /nsfw-language: en at 18-25 \(fuck\)/,
    );
  });

  test('a surname after a given name is clean; the same word as an insult is flagged', async (t) => {
    const svc = await buildService(t, { ASSAY_CLAMD: clamd.socket, ASSAY_NSFW_WORKERS: '1' });
    const languageOnly = await keyWith(svc, ['NSFW_LANGUAGE']);
    const copyright = [
      'Copyright: 2003-2005, Jérôme Nègre <jerome.negre@example.org>',
      '           2004, Jean-Pierre Nègre',
      'Comment: Nègre, Jérôme wrote the extension functions.',
    ].join('\n');
    const clean = await upload(svc.url, languageOnly, copyright);
    assert.equal(clean.status, 201);
    assert.deepEqual(clean.body.findings, []);
    for (const insult of ['Sale nègre !', 'SALE NÈGRE', 'Nègre!', 'Sale Nègre']) {
      const flagged = await upload(svc.url, languageOnly, insult);
      assert.deepEqual(flagged.body.findings, ['content.fr.language.nsfw.0'], insult);
    }
  });
});
