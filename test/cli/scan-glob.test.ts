import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { compileGlob, MAX_GLOB_LENGTH } from '../../src/cli/glob.js';

describe('assay scan --exclude globs', () => {
  test('wildcards, classes, folders and escapes', () => {
    const cases: Array<[pattern: string, path: string, matches: boolean]> = [
      ['*.log', 'debug.log', true],
      ['*.log', 'logs/debug.log', false],
      ['*.log', '.log', true],
      ['?.js', 'a.js', true],
      ['?.js', 'ab.js', false],
      ['?', '/', false],
      ['[a-c]x', 'bx', true],
      ['[!a-c]x', 'bx', false],
      ['[^a-c]x', 'dx', true],
      ['[]]', ']', true],
      ['[a', '[a', true],
      ['*.[ch]', 'main.h', true],
      ['build/**', 'build/out/a.o', true],
      ['build/**', 'src/build/a.o', false],
      ['**/build', 'build', true],
      ['**/build', 'a/b/build', true],
      ['a/**/b', 'a/b', true],
      ['a/**/b', 'a/x/y/b', true],
      ['a/**/b', 'a/xb', false],
      ['a/**/b', 'ab', false],
      ['a/*/c', 'a/b/c', true],
      ['a/*/c', 'a/b/d/c', false],
      ['a**', 'a/b/c', true],
      ['\\*', '*', true],
      ['\\*', 'a', false],
      ['\\\\', '\\', true],
      ['node_modules', 'node_modules', true],
      ['node_modules', 'node_modules2', false],
    ];
    for (const [pattern, path, matches] of cases) {
      assert.equal(compileGlob(pattern)(path), matches, `${pattern} on ${path}`);
    }
  });

  test('matching takes time linear in the path, whatever the pattern', () => {
    // A backtracking matcher (or a regular expression built from the pattern) takes exponential
    // time here; node:path's matchesGlob did not finish in 2 minutes on 2,000 characters.
    const matches = compileGlob('*a*a*a*a*a*a*a*a*a*a*a*a*b');
    const started = performance.now();
    assert.equal(matches('a'.repeat(50_000)), false);
    assert.ok(performance.now() - started < 2_000, `${performance.now() - started} ms`);
    assert.throws(() => compileGlob('*'.repeat(MAX_GLOB_LENGTH + 1)), /at most/);
  });
});
