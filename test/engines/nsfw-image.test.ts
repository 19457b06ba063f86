import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import sharp from 'sharp';
import { IMAGE_RUNTIMES } from '../../src/engines/nsfw-image/classifier.js';
import { NsfwImageEngine, NUDITY_FINDING } from '../../src/engines/nsfw-image/engine.js';
import { packageRoot } from '../../src/paths.js';
import { drawing, photoLike, pngBomb, screenshot } from '../helpers/images.js';

const signal = () => AbortSignal.timeout(60_000);

describe('nsfw-image engine', () => {
  let engine: NsfwImageEngine;
  let photo: Buffer;

  before(async () => {
    engine = await NsfwImageEngine.create({ poolSize: 1 });
    photo = await photoLike(1024, 768, 1);
  });
  after(() => engine.close());

  test('wants the image types sharp decodes, as the type detector names them', () => {
    for (const type of [
      'image/jpeg',
      'image/png',
      'image/webp',
      'image/gif',
      'image/tiff',
      'image/avif',
      'image/heic',
    ]) {
      assert.equal(engine.wants(type), true, type);
    }
    for (const type of ['image/svg+xml', 'image/bmp', 'text/plain', 'application/pdf']) {
      assert.equal(engine.wants(type), false, type);
    }
  });

  test('neutral photos, drawings and screenshots are not flagged; the scores go into the trace', async () => {
    const images: Array<[string, Buffer]> = [
      ['drawing', await drawing()],
      ['screenshot', await screenshot()],
    ];
    for (let seed = 2; seed < 8; seed++) {
      images.push([`photo ${seed}`, await photoLike(1155, 866, seed)]);
    }
    for (const [name, image] of images) {
      const report = await engine.examine(image, 'image/png', signal());
      assert.deepEqual(report.findings, [], `${name}: ${report.trace.join('\n')}`);
      assert.match(
        report.trace.join('\n'),
        /Drawing [\d.]+, Hentai [\d.]+, Neutral [\d.]+, Porn [\d.]+, Sexy [\d.]+; Porn \+ Hentai [\d.]+ \(threshold 0\.5\)/,
      );
    }
  });

  test('JPEG, PNG, WebP, GIF, TIFF and AVIF are decoded and examined', async () => {
    const formats = ['jpeg', 'png', 'webp', 'gif', 'tiff', 'avif'] as const;
    for (const format of formats) {
      const image = await sharp(photo).toFormat(format).toBuffer();
      const report = await engine.examine(image, `image/${format}`, signal());
      assert.deepEqual(report.findings, [], format);
      // sharp names AVIF by its container, HEIF
      assert.match(
        report.trace[0] ?? '',
        new RegExp(`nsfw-image: ${format === 'avif' ? 'heif' : format} 1024 x 768`),
      );
    }
  });

  test('an animated GIF is examined by its first frame', async () => {
    const frames = await Promise.all(
      [await drawing(), await screenshot()].map((frame) =>
        sharp(frame).resize(320, 240, { fit: 'fill' }).png().toBuffer(),
      ),
    );
    const gif = await sharp(frames, { join: { animated: true } })
      .gif()
      .toBuffer();
    assert.equal((await sharp(gif).metadata()).pages, 2);
    const report = await engine.examine(gif, 'image/gif', signal());
    assert.deepEqual(report.findings, []);
    assert.match(report.trace[0] ?? '', /nsfw-image: gif 320 x 240/);
  });

  test('the sample image of COMPAT.md is flagged, by its hash', async () => {
    const sample = readFileSync(join(packageRoot(), 'static', 'samples', 'image.jpg'));
    const report = await engine.examine(sample, 'image/jpeg', signal());
    assert.deepEqual(report.findings, [NUDITY_FINDING]);
    // One byte more and it is an ordinary (neutral) picture.
    const changed = Buffer.concat([sample, Buffer.from([0])]);
    assert.deepEqual((await engine.examine(changed, 'image/jpeg', signal())).findings, []);
  });

  test('the threshold decides: at 0 every image is flagged', async () => {
    const strict = await NsfwImageEngine.create({ poolSize: 1, threshold: 0 });
    try {
      const report = await strict.examine(await drawing(), 'image/png', signal());
      assert.deepEqual(report.findings, [NUDITY_FINDING]);
    } finally {
      await strict.close();
    }
  });

  test('a corrupt image is an error, never a pass', async () => {
    await assert.rejects(
      engine.examine(randomBytes(5000), 'image/png', signal()),
      /cannot read the image/,
    );
    const truncated = photo.subarray(0, Math.floor(photo.length / 2));
    await assert.rejects(
      engine.examine(truncated, 'image/jpeg', signal()),
      /cannot decode the jpeg image/,
    );
  });

  test('a 30,000 x 30,000 PNG bomb is refused from its header, without decoding it', async () => {
    const bomb = pngBomb(30_000, 30_000);
    assert.ok(bomb.length < 1024 * 1024, 'the bomb is a small file');
    const before = process.memoryUsage().rss;
    await assert.rejects(
      engine.examine(bomb, 'image/png', signal()),
      /30000 x 30000 pixels, more than the 100000000 examined/,
    );
    // Decoding it would take 900 MB.
    assert.ok(process.memoryUsage().rss - before < 200 * 1024 * 1024);
  });

  test('content over the size cap is an error, never a pass', async () => {
    const small = await NsfwImageEngine.create({ poolSize: 1, maxBytes: 1000 });
    try {
      await assert.rejects(small.examine(photo, 'image/jpeg', signal()), /at most 1000 bytes/);
    } finally {
      await small.close();
    }
  });

  test('a stopped examination is an error, and the engine goes on working', async () => {
    await assert.rejects(engine.examine(photo, 'image/jpeg', AbortSignal.abort()), /stopped/);
    const controller = new AbortController();
    const running = engine.examine(photo, 'image/jpeg', controller.signal);
    setImmediate(() => controller.abort(new Error('the item was cancelled')));
    await assert.rejects(running, /stopped: the item was cancelled/);
    const report = await engine.examine(photo, 'image/jpeg', signal());
    assert.deepEqual(report.findings, []);
  });

  test('without the model the engine does not start, and says why', async () => {
    const empty = mkdtempSync(join(tmpdir(), 'assay-no-model-'));
    try {
      for (const runtime of IMAGE_RUNTIMES) {
        await assert.rejects(
          NsfwImageEngine.create({ poolSize: 1, modelDir: empty, runtime }),
          /the NSFW image model is missing or broken \(run npm run build\)/,
          runtime,
        );
      }
    } finally {
      rmSync(empty, { recursive: true, force: true });
    }
  });
});
