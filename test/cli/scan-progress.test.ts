import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { formatTable, printable, ScanProgress, tableRow } from '../../src/cli/scan-report.js';

/** A stand-in for stderr that records what is written; a terminal or not. */
function stream(isTTY: boolean): NodeJS.WriteStream & { written: string[] } {
  const written: string[] = [];
  return {
    isTTY,
    written,
    write(text: string) {
      written.push(text);
      return true;
    },
  } as unknown as NodeJS.WriteStream & { written: string[] };
}

describe('assay scan output', () => {
  test('on a terminal the bar is redrawn in place with files, bytes, rate and ETA; notes go above it', () => {
    const terminal = stream(true);
    const progress = new ScanProgress(terminal);
    progress.start(4, 4 * 1024 * 1024);
    progress.fileDone(1024 * 1024);
    progress.note('error: a: EACCES');
    progress.finish();
    // The escape character written as <ESC>, to match it readably.
    const text = terminal.written.join('').replaceAll('\u001b', '<ESC>');
    assert.match(
      text,
      /\rscanning \[#+\.+\] 1\/4 files, 1\.0 MB\/4\.0 MB, [\d.]+ [KMG]?B\/s, ETA \d+s<ESC>\[K/,
    );
    assert.match(text, /\r<ESC>\[Kerror: a: EACCES\n\rscanning /);
    assert.ok(text.endsWith('\n'));
  });

  test('elsewhere plain lines, one per tenth of the files', () => {
    const log = stream(false);
    const progress = new ScanProgress(log);
    progress.start(20, 2000);
    for (let i = 0; i < 20; i += 1) progress.fileDone(100);
    progress.finish();
    assert.equal(log.written.length, 11, 'the start and each tenth');
    assert.ok(log.written.every((line) => line.endsWith('\n') && !line.includes('\r')));
    assert.match(log.written.at(-1) ?? '', /20\/20 files, 2\.0 KB\/2\.0 KB, .* ETA 0s/);
  });

  test('file names reach the terminal with their control characters escaped', () => {
    assert.equal(printable('evil\u001b]0;title\u0007.txt'), 'evil\\u001b]0;title\\u0007.txt');
    assert.equal(printable('del\u007f c1\u009b'), 'del\\u007f c1\\u009b');
    const table = formatTable([
      tableRow({
        path: Buffer.from('a\nb'),
        verdict: 'flagged',
        result: { findings: ['content.malicious.x'] },
      }),
    ]);
    assert.equal(table.split('\n').length, 2);
    assert.match(table, /flagged {2}"a\\nb" +content\.malicious\.x/);
  });
});
