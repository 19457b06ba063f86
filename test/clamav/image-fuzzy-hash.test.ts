import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { loadConfig } from '../../src/config.js';
import { ClamdClient } from '../../src/engines/clamav/clamd-client.js';
import {
  type ClamdLogger,
  findClamdBinary,
  ManagedClamd,
} from '../../src/engines/clamav/managed-clamd.js';
import { photoLike } from '../helpers/images.js';

/**
 * ASSAY_CLAMD_IMAGE_FUZZY_HASH: the managed clamd's ScanImageFuzzyHash. A `fuzzy_img` signature
 * made at run time from a generated photo (sigtool computes its hash) matches that photo when the
 * hash is on, and cannot when it is off.
 */
const silent: ClamdLogger = { info() {}, warn() {}, error() {}, debug() {} };
const clamdPath = findClamdBinary();
const SIGNATURE = 'Assay.Test.FuzzyImg';

async function startClamd(dir: string, imageFuzzyHash: boolean): Promise<ManagedClamd> {
  const clamd = new ManagedClamd({
    dataDir: join(dir, imageFuzzyHash ? 'on' : 'off'),
    clamdPath: clamdPath ?? '',
    maxFileSize: 10 * 1024 * 1024,
    systemDatabaseDir: join(dir, 'databases'),
    imageFuzzyHash,
    logger: silent,
  });
  await clamd.start();
  return clamd;
}

async function scan(clamd: ManagedClamd, content: Buffer): Promise<string | null> {
  const stream = new ClamdClient(clamd.address).instream();
  await stream.write(content);
  return (await stream.finish()).signature;
}

describe('the image fuzzy hash setting', {
  skip: clamdPath === null ? 'clamd is not installed' : false,
}, () => {
  let dir: string;
  let photo: Buffer;
  const running: ManagedClamd[] = [];

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'assay-fuzzy-'));
    photo = await photoLike(640, 480, 11);
    const photoPath = join(dir, 'photo.jpg');
    await writeFile(photoPath, photo);
    // "photo.jpg: 1f2e3d4c5b6a7988": sigtool from ClamAV (./setup.sh --test installs it).
    const hash = execFileSync('sigtool', ['--fuzzy-img', photoPath], { encoding: 'utf8' })
      .trim()
      .split(' ')
      .at(-1);
    assert.match(hash ?? '', /^[0-9a-f]{16}$/);
    await mkdir(join(dir, 'databases'));
    await writeFile(
      join(dir, 'databases', 'fuzzy.ldb'),
      `${SIGNATURE};Engine:150-255,Target:0;0;fuzzy_img#${hash}\n`,
    );
  });

  after(async () => {
    for (const clamd of running) await clamd.stop();
    await rm(dir, { recursive: true, force: true });
  });

  test('on (the default): a fuzzy_img signature finds its image', async () => {
    const clamd = await startClamd(dir, true);
    running.push(clamd);
    assert.equal(await scan(clamd, photo), `${SIGNATURE}.UNOFFICIAL`);
    const conf = await readFile(join(dir, 'on', 'clamd', 'clamd.conf'), 'utf8');
    assert.match(conf, /^ScanImageFuzzyHash yes$/m);
  });

  test('off: the same image scans clean, fuzzy_img signatures cannot match', async () => {
    const clamd = await startClamd(dir, false);
    running.push(clamd);
    assert.equal(await scan(clamd, photo), null);
    const conf = await readFile(join(dir, 'off', 'clamd', 'clamd.conf'), 'utf8');
    assert.match(conf, /^ScanImageFuzzyHash no$/m);
  });

  test('the setting: yes by default, no, and nothing else', () => {
    const base = { ASSAY_DATA_DIR: dir };
    assert.equal(loadConfig(base).clamdImageFuzzyHash, true);
    assert.equal(
      loadConfig({ ...base, ASSAY_CLAMD_IMAGE_FUZZY_HASH: 'no' }).clamdImageFuzzyHash,
      false,
    );
    assert.throws(
      () => loadConfig({ ...base, ASSAY_CLAMD_IMAGE_FUZZY_HASH: 'off' }),
      /ASSAY_CLAMD_IMAGE_FUZZY_HASH/,
    );
  });
});
