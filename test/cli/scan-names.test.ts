import '../helpers/loopback-only.js';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { chmodSync, rmSync, writeFileSync } from 'node:fs';
import { describe, type TestContext, test } from 'node:test';
import { argumentBytes, displayPath, jsonPath, quotedPath } from '../../src/cli/scan-names.js';
import { eicar } from '../../src/engines/test-content.js';
import { assayCliAsync, type CliRun } from '../helpers/cli.js';
import { randomContent } from '../helpers/content.js';
import { buildService, type TestService, tempDir, useSharedClamd } from '../helpers/service.js';

const clamd = useSharedClamd();
const EICAR_FINDING = 'content.malicious.eicar-test-signature';
const NO_SETTINGS = { ASSAY_URL: '', ASSAY_KEY: '', ASSAY_SECRET: '', ASSAY_TOKEN: '' };
/** `report\xff.txt`: not UTF-8. Node reads it as `report\uFFFD.txt`, the name of the next one. */
const BAD_NAME = Buffer.from([...Buffer.from('report'), 0xff, ...Buffer.from('.txt')]);
const REPLACEMENT_NAME = Buffer.from('report\uFFFD.txt');

/** The quoted form read back, as a user's script would: JSON's escapes plus `\xHH` for a byte. */
function unquote(quoted: string): Buffer {
  assert.ok(quoted.startsWith('"') && quoted.endsWith('"'), quoted);
  const parts: Buffer[] = [];
  const body = quoted.slice(1, -1);
  for (let at = 0; at < body.length; ) {
    const escaped = /^\\(x[0-9a-f]{2}|u[0-9a-f]{4}|.)/.exec(body.slice(at, at + 6));
    if (escaped === null) {
      const char = String.fromCodePoint(body.codePointAt(at) ?? 0);
      parts.push(Buffer.from(char));
      at += char.length;
      continue;
    }
    const code = escaped[1] ?? '';
    if (code.startsWith('x')) parts.push(Buffer.from([Number.parseInt(code.slice(1), 16)]));
    else parts.push(Buffer.from(JSON.parse(`"${escaped[0]}"`) as string));
    at += escaped[0].length;
  }
  return Buffer.concat(parts);
}

function folderOf(t: TestContext, files: Array<[name: Buffer, content: string | Buffer]>): string {
  const root = tempDir('assay-scan-names-');
  chmodSync(root, 0o755);
  // Buffer paths: Linux allows any byte in a name but '/' and NUL.
  for (const [name, content] of files) {
    writeFileSync(Buffer.concat([Buffer.from(`${root}/`), name]), content);
  }
  t.after(() => rmSync(root, { recursive: true, force: true }));
  return root;
}

function scan(svc: TestService, args: string[], env: Record<string, string> = {}) {
  return assayCliAsync(
    ['scan', '--url', svc.url, '--key', svc.keyId, '--secret', svc.secret, ...args],
    { env: { ...NO_SETTINGS, ...env } },
  );
}

function ndjson(run: CliRun): Array<Record<string, unknown> & { path: string }> {
  return run.stdout
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line) as Record<string, unknown> & { path: string });
}

describe('assay scan: names that are not UTF-8', () => {
  test('the quoted form is reversible, and used only where a name needs it', () => {
    assert.equal(displayPath(Buffer.from('dir/plain name.txt')), 'dir/plain name.txt');
    assert.equal(jsonPath(Buffer.from('dir/a\nb')), 'dir/a\nb', 'JSON carries control characters');
    assert.equal(displayPath(Buffer.from('dir/a\nb')), '"dir/a\\nb"');
    assert.equal(displayPath(BAD_NAME), '"report\\xff.txt"');
    assert.equal(jsonPath(BAD_NAME), '"report\\xff.txt"');
    assert.equal(displayPath(REPLACEMENT_NAME), 'report\uFFFD.txt');
    // A name that begins with a quote is quoted too, so that no name reads as another's quoted form.
    assert.equal(jsonPath(Buffer.from('"report\\xff.txt"')), '"\\"report\\\\xff.txt\\""');
    assert.equal(displayPath(Buffer.from('a\\b')), 'a\\b');
    // Overlong forms, surrogates and truncated characters are bytes, not characters.
    assert.equal(
      quotedPath(Buffer.from([0xc0, 0xaf, 0xed, 0xa0, 0x80, 0xe2, 0x82])),
      '"\\xc0\\xaf\\xed\\xa0\\x80\\xe2\\x82"',
    );
    assert.equal(quotedPath(Buffer.from('é€😀\u007f')), '"é€😀\\u007f"');
    for (let round = 0; round < 2000; round += 1) {
      const name = randomBytes(1 + (round % 40));
      assert.deepEqual(unquote(quotedPath(name)), name, name.toString('hex'));
    }
  });

  test('a path given on the command line keeps its bytes (from /proc/self/cmdline)', () => {
    const cmdline = [Buffer.from('node'), Buffer.from('scan'), BAD_NAME, Buffer.from('x\uFFFD')];
    assert.deepEqual(argumentBytes(['report\uFFFD.txt', 'plain', 'x\uFFFD'], cmdline), [
      BAD_NAME,
      Buffer.from('plain'),
      Buffer.from('x\uFFFD'),
    ]);
    const both = [
      ...cmdline,
      REPLACEMENT_NAME,
      Buffer.concat([BAD_NAME.subarray(0, 6), Buffer.from([0xfe]), Buffer.from('.txt')]),
    ];
    assert.throws(() => argumentBytes(['report\uFFFD.txt'], both), /read alike here/);
  });

  test('EICAR in a name that is not UTF-8 is flagged; its neighbour, named as Node reads it, is sent once', async (t) => {
    const svc = await buildService(t, { ASSAY_CLAMD: clamd.socket });
    const harmless = randomContent(1000);
    const root = folderOf(t, [
      [BAD_NAME, eicar()],
      [REPLACEMENT_NAME, harmless],
    ]);
    const json = await scan(svc, [root, '--json']);
    assert.equal(json.status, 1, json.stderr);
    const lines = ndjson(json);
    assert.deepEqual(lines.map((line) => [line.path, line.findings, line.content_length]).sort(), [
      [`"${root}/report\\xff.txt"`, [EICAR_FINDING], eicar().length],
      [`${root}/report\uFFFD.txt`, [], 1000],
    ]);
    assert.deepEqual(
      unquote(lines.find((l) => l.path.startsWith('"'))?.path ?? ''),
      Buffer.concat([Buffer.from(`${root}/`), BAD_NAME]),
    );
    assert.match(json.stderr, /2 files .*: 1 clean, 1 flagged, 0 errors/);

    const table = await scan(svc, [root]);
    assert.equal(table.status, 1, table.stderr);
    assert.match(
      table.stdout,
      new RegExp(`^flagged +"${root}/report\\\\xff\\.txt" +${EICAR_FINDING}$`, 'm'),
    );
    assert.match(table.stdout, new RegExp(`^clean +${root}/report\uFFFD\\.txt$`, 'm'));

    // Given itself: Node's arguments are text, so the shell passes the bytes (printf's \xff).
    const alone = await assayCliAsync(
      ['scan', '--json', '--url', svc.url, '--key', svc.keyId, '--secret', svc.secret],
      {
        env: { ...NO_SETTINGS, SCAN_PATH: `${root}/report\\xff.txt` },
        wrapper: ['bash', '-c', 'exec "$@" "$(printf %b "$SCAN_PATH")"', 'bash'],
      },
    );
    assert.equal(alone.status, 1, alone.stderr);
    assert.deepEqual(
      ndjson(alone).map((line) => [line.path, line.findings]),
      [[`"${root}/report\\xff.txt"`, [EICAR_FINDING]]],
    );
  });
});
