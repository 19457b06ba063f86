import '../helpers/loopback-only.js';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, type TestContext, test } from 'node:test';
import { traceMessages } from '../helpers/callbacks.js';
import { waitUntil } from '../helpers/client.js';
import { randomContent, uploadForm } from '../helpers/content.js';
import { capturedLogger } from '../helpers/logs.js';
import { buildService, type TestService, tempDir } from '../helpers/service.js';

// Issue 26: signature files added, changed, removed or broken while Assay runs reach its managed
// clamd without a restart; a broken one is refused by name and the rest keeps scanning.

/** Writes a file at once (as updaters do: a new name, then a rename). */
function writeAtOnce(path: string, text: string): void {
  writeFileSync(`${path}.new`, text);
  renameSync(`${path}.new`, path);
}

function ndb(signature: string, marker: Buffer): string {
  return `${signature}:0:*:${marker.toString('hex')}\n`;
}

function yara(rule: string, marker: string): string {
  return `rule ${rule} { strings: $a = "${marker}" condition: $a }\n`;
}

/** Content with `marker` inside random bytes (fresh each time: clamd caches by hash). */
function carrying(marker: Buffer | string): Buffer {
  return Buffer.concat([randomContent(700), Buffer.from(marker), randomContent(700)]);
}

// A YARA rule clamd parses but cannot load: PCRE2 refuses the regex when clamd compiles its whole
// set, and clamd's message names no file.
function uncompilableRule(name: string): string {
  return `rule ${name} { strings: $r = /a[^b]{1,100000}b/ condition: $r }\n`;
}

function postScan(svc: TestService, content: Buffer): Promise<Response> {
  return fetch(`${svc.url}/v2.2/files`, {
    method: 'POST',
    headers: { authorization: svc.auth },
    body: uploadForm(content),
  });
}

async function scan(
  svc: TestService,
  content: Buffer,
): Promise<{ id: string; findings: string[] }> {
  const response = await postScan(svc, content);
  assert.equal(response.status, 201, await response.clone().text());
  return (await response.json()) as { id: string; findings: string[] };
}

interface ClamavReadiness {
  databases_version: string | null;
  refused_databases: string[];
}

async function clamavReadiness(svc: TestService): Promise<ClamavReadiness> {
  const ready = await fetch(`${svc.url}/health/ready`);
  assert.equal(ready.status, 200);
  const body = (await ready.json()) as { engines: ClamavReadiness[] };
  const [clamav] = body.engines;
  assert.ok(clamav !== undefined);
  return clamav;
}

async function databasesVersion(svc: TestService): Promise<string | null> {
  return (await clamavReadiness(svc)).databases_version;
}

/** The error that names `file` as a refused database. */
function refusal(log: ReturnType<typeof capturedLogger>, file: string) {
  return log
    .records()
    .find((r) => r.file === file && String(r.msg).startsWith('signature database refused'));
}

async function flaggedSoon(svc: TestService, content: () => Buffer, finding: string) {
  await waitUntil(
    `content is flagged ${finding}`,
    async () => (await scan(svc, content())).findings.includes(finding),
    30_000,
  );
}

async function serviceWithFolders(
  t: TestContext,
  atStart: (own: string) => void = () => {},
  env: Record<string, string> = {},
) {
  const dir = tempDir('assay-signatures-');
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const operator = join(dir, 'mine');
  const official = join(dir, 'official');
  mkdirSync(operator);
  mkdirSync(official);
  atStart(operator);
  const log = capturedLogger('info');
  const svc = await buildService(
    t,
    {
      ASSAY_SIGNATURES_DIR: operator,
      ASSAY_CLAMD_DATABASE_DIR: official,
      ASSAY_SIGNATURES_CHECK: '1',
      ...env,
    },
    log.logger,
  );
  return { svc, operator, official, log };
}

describe('signatures, live', () => {
  test('a YARA rule and an .ndb file added at run time flag content without a restart; removed, they stop', async (t) => {
    const { svc, operator, official } = await serviceWithFolders(t);
    const clamdPid = svc.service.managedClamd?.pid;
    assert.ok(clamdPid !== undefined);
    const yaraMarker = `assay-yara-${randomBytes(12).toString('hex')}`;
    const ndbMarker = randomBytes(24);
    const early = carrying(yaraMarker);
    assert.deepEqual((await scan(svc, early)).findings, []);
    assert.deepEqual((await scan(svc, carrying(ndbMarker))).findings, []);
    const before = await databasesVersion(svc);
    assert.match(before ?? '', /^sha256:[0-9a-f]{16}$/);

    // The operator's folder takes a rule; the official one a file that did not exist at start.
    writeAtOnce(join(operator, 'mine.yar'), yara('AssayLiveRule', yaraMarker));
    writeAtOnce(join(official, 'third-party.ndb'), ndb('Assay.Test.Live', ndbMarker));
    await flaggedSoon(svc, () => carrying(yaraMarker), 'content.malicious.yara.assayliverule');
    await flaggedSoon(svc, () => carrying(ndbMarker), 'content.malicious.assay.test.live');
    assert.equal(svc.service.managedClamd?.pid, clamdPid, 'the same clamd: no restart');
    // clamd scans with a set as it activates it; Assay records the set a moment later (until then
    // readiness and traces say it loads), and a second change may have been loaded after the first.
    let after: string | null = null;
    await waitUntil(
      'readiness shows the new set',
      async () => {
        after = await databasesVersion(svc);
        return after !== null && after !== before;
      },
      30_000,
    );
    assert.match(after ?? '', /^sha256:[0-9a-f]{16}$/);

    // The verdict given before the change is not reused for the same content.
    const again = await scan(svc, early);
    assert.deepEqual(again.findings, ['content.malicious.yara.assayliverule']);
    const trace = await traceMessages(svc.url, svc.auth, again.id);
    assert.ok(
      trace.some(
        (line) =>
          line.startsWith('engine clamav versions: clamd ') && line.includes(`databases ${after}`),
      ),
      `the trace names the versions that scanned it: ${trace.join(' | ')}`,
    );

    rmSync(join(operator, 'mine.yar'));
    await waitUntil(
      'a removed rule stops flagging',
      async () => (await scan(svc, carrying(yaraMarker))).findings.length === 0,
      30_000,
    );
    assert.deepEqual((await scan(svc, carrying(ndbMarker))).findings, [
      'content.malicious.assay.test.live',
    ]);
  });

  test('a broken database or rule file is refused by name; the rest loads and scanning goes on', async (t) => {
    const { svc, operator, log } = await serviceWithFolders(t);
    const good = randomBytes(24);
    writeAtOnce(join(operator, 'good.ndb'), ndb('Assay.Test.Good', good));
    await flaggedSoon(svc, () => carrying(good), 'content.malicious.assay.test.good');
    const version = await databasesVersion(svc);

    // A malformed body signature (clamd refuses the whole load for it), a rule with an undefined
    // string (clamd leaves the rule out), and a good file added beside them.
    const later = randomBytes(24);
    writeAtOnce(join(operator, 'broken.ndb'), 'Assay.Test.Broken:0:*:zzzz\n');
    writeAtOnce(join(operator, 'broken.yar'), 'rule Broken { strings: $a = "x" condition: $b }\n');
    writeAtOnce(join(operator, 'later.ndb'), ndb('Assay.Test.Later', later));
    await flaggedSoon(svc, () => carrying(later), 'content.malicious.assay.test.later');
    assert.deepEqual((await scan(svc, carrying(good))).findings, [
      'content.malicious.assay.test.good',
    ]);
    const refused = log.records().filter((r) => /refused/.test(String(r.msg)));
    assert.ok(
      refused.some((r) => r.file === join(operator, 'broken.ndb') && r.level === 50),
      `an error names the broken database: ${JSON.stringify(refused)}`,
    );
    assert.ok(
      refused.some((r) => r.file === join(operator, 'broken.yar')),
      `an error names the broken rule file: ${JSON.stringify(refused)}`,
    );
    const now = await clamavReadiness(svc);
    assert.match(now.databases_version ?? '', /^sha256:/, 'ready, on a known set');
    assert.notEqual(now.databases_version, version);
    assert.deepEqual(now.refused_databases, ['broken.ndb']);

    // Mended, the refused file is loaded.
    const mended = randomBytes(24);
    writeAtOnce(join(operator, 'broken.ndb'), ndb('Assay.Test.Mended', mended));
    await flaggedSoon(svc, () => carrying(mended), 'content.malicious.assay.test.mended');
  });

  test('a broken database file present at start is refused, and clamd starts without it', async (t) => {
    const good = randomBytes(24);
    const { svc, operator, log } = await serviceWithFolders(t, (dir) => {
      writeFileSync(join(dir, 'broken.ndb'), 'Assay.Test.Broken:0:*:zzzz\n');
      writeFileSync(join(dir, 'good.ndb'), ndb('Assay.Test.Good', good));
    });
    assert.deepEqual((await scan(svc, carrying(good))).findings, [
      'content.malicious.assay.test.good',
    ]);
    assert.ok(
      log
        .records()
        .some((r) => r.file === join(operator, 'broken.ndb') && /refused/.test(String(r.msg))),
      'an error names the broken database',
    );
    const ready = await clamavReadiness(svc);
    assert.match(ready.databases_version ?? '', /^sha256:/);
    assert.deepEqual(ready.refused_databases, ['broken.ndb']);
  });

  // Issue 39: a file clamd refuses with a message naming none is found by checking the new files.
  test('a rule file clamd refuses without naming it, added at run time, is found and left out; the rest loads', async (t) => {
    const { svc, operator, log } = await serviceWithFolders(t);
    const good = randomBytes(24);
    writeAtOnce(join(operator, 'good.ndb'), ndb('Assay.Test.Good', good));
    await flaggedSoon(svc, () => carrying(good), 'content.malicious.assay.test.good');
    const version = await databasesVersion(svc);

    const later = randomBytes(24);
    const yaraMarker = `assay-yara-${randomBytes(12).toString('hex')}`;
    writeAtOnce(join(operator, 'uncompilable.yar'), uncompilableRule('Uncompilable'));
    writeAtOnce(join(operator, 'later.ndb'), ndb('Assay.Test.Later', later));
    writeAtOnce(join(operator, 'later.yar'), yara('AssayLaterRule', yaraMarker));
    await flaggedSoon(svc, () => carrying(later), 'content.malicious.assay.test.later');
    await flaggedSoon(svc, () => carrying(yaraMarker), 'content.malicious.yara.assaylaterrule');
    assert.deepEqual((await scan(svc, carrying(good))).findings, [
      'content.malicious.assay.test.good',
    ]);
    const error = refusal(log, join(operator, 'uncompilable.yar'));
    assert.equal(error?.level, 50, `an error names the file: ${JSON.stringify(error)}`);
    assert.match(String(error?.reason), /PCRE2/, "with clamd's reason");
    let ready: ClamavReadiness | undefined;
    await waitUntil(
      'readiness shows the set loaded without the file, and names it',
      async () => {
        ready = await clamavReadiness(svc);
        return ready.databases_version !== null && ready.databases_version !== version;
      },
      30_000,
    );
    assert.match(ready?.databases_version ?? '', /^sha256:[0-9a-f]{16}$/);
    assert.deepEqual(ready?.refused_databases, ['uncompilable.yar']);

    // Mended, it is loaded, and no longer named.
    const mended = `assay-yara-${randomBytes(12).toString('hex')}`;
    writeAtOnce(join(operator, 'uncompilable.yar'), yara('AssayMendedRule', mended));
    await flaggedSoon(svc, () => carrying(mended), 'content.malicious.yara.assaymendedrule');
    await waitUntil(
      'readiness names no refused file',
      async () => (await clamavReadiness(svc)).refused_databases.length === 0,
      30_000,
    );
  });

  test('a clamd restarted by its supervisor starts without a file it cannot load', async (t) => {
    const good = randomBytes(24);
    const yaraMarker = `assay-yara-${randomBytes(12).toString('hex')}`;
    // No check of the folders during the test: the change reaches clamd only through its restart.
    const { svc, operator, log } = await serviceWithFolders(
      t,
      (dir) => {
        writeFileSync(join(dir, 'good.ndb'), ndb('Assay.Test.Good', good));
        writeFileSync(join(dir, 'mine.yar'), yara('AssayMine', yaraMarker));
      },
      { ASSAY_SIGNATURES_CHECK: '3600' },
    );
    assert.deepEqual((await scan(svc, carrying(yaraMarker))).findings, [
      'content.malicious.yara.assaymine',
    ]);
    const version = await databasesVersion(svc);
    const firstPid = svc.service.managedClamd?.pid;
    assert.ok(firstPid !== undefined);

    writeAtOnce(join(operator, 'mine.yar'), uncompilableRule('Uncompilable'));
    process.kill(firstPid, 'SIGKILL');
    await waitUntil(
      'a restarted clamd scans',
      async () => {
        const response = await postScan(svc, carrying(good));
        if (response.status !== 201) return false;
        const { findings } = (await response.json()) as { findings: string[] };
        return findings.includes('content.malicious.assay.test.good');
      },
      60_000,
    );
    assert.notEqual(svc.service.managedClamd?.pid, firstPid);
    assert.equal(refusal(log, join(operator, 'mine.yar'))?.level, 50, 'an error names the file');
    // Assay records the set a moment after clamd answers.
    let ready: ClamavReadiness | undefined;
    await waitUntil(
      'readiness shows the set loaded without the file',
      async () => {
        ready = await clamavReadiness(svc);
        return ready.databases_version !== null;
      },
      30_000,
    );
    assert.match(ready?.databases_version ?? '', /^sha256:/);
    assert.notEqual(ready?.databases_version, version);
    assert.deepEqual(ready?.refused_databases, ['mine.yar']);
  });

  test('Assay starts with two files clamd refuses without naming them among others, each found in few checks', async (t) => {
    const good = randomBytes(24);
    const markers = [1, 2, 3, 4].map(() => `assay-yara-${randomBytes(12).toString('hex')}`);
    const { svc, operator, log } = await serviceWithFolders(t, (dir) => {
      writeFileSync(join(dir, 'good.ndb'), ndb('Assay.Test.Good', good));
      markers.forEach((marker, index) => {
        writeFileSync(join(dir, `rules-${index}.yar`), yara(`AssayRule${index}`, marker));
      });
      writeFileSync(join(dir, 'rules-0b.yar'), uncompilableRule('Uncompilable0'));
      writeFileSync(join(dir, 'rules-2b.yar'), uncompilableRule('Uncompilable2'));
    });
    assert.deepEqual((await scan(svc, carrying(good))).findings, [
      'content.malicious.assay.test.good',
    ]);
    for (const [index, marker] of markers.entries()) {
      assert.deepEqual((await scan(svc, carrying(marker))).findings, [
        `content.malicious.yara.assayrule${index}`,
      ]);
    }
    for (const name of ['rules-0b.yar', 'rules-2b.yar']) {
      const error = refusal(log, join(operator, name));
      assert.equal(error?.level, 50, `an error names ${name}`);
      assert.match(String(error?.reason), /PCRE2/, "with clamd's reason");
    }
    // Seven new files, then six: at most ceil(log2(7)) + 1 checks each.
    const found = log
      .records()
      .filter((r) => r.msg === 'found the database file clamd cannot load');
    assert.equal(found.length, 2);
    assert.ok(
      found.every((r) => Number(r.checks) <= 4),
      JSON.stringify(found),
    );
    const ready = await clamavReadiness(svc);
    assert.match(ready.databases_version ?? '', /^sha256:/);
    assert.deepEqual(ready.refused_databases, ['rules-0b.yar', 'rules-2b.yar']);
    assert.equal(JSON.stringify(ready).includes(operator), false, 'readiness names no folder');
  });
});
