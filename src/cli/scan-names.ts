// File names for `assay scan`: bytes, as Linux has them (any byte but '/' and NUL, not
// necessarily UTF-8), and the reversible text forms the table, stderr and NDJSON show.

import { isUtf8 } from 'node:buffer';
import { readFileSync } from 'node:fs';
import { basename, join } from 'node:path';

/**
 * `folder/name`, joined as node:path joins text. Latin-1 maps each byte to one character and back,
 * and joining only looks at '/' and '.', so the bytes of both come through unchanged.
 */
export function joinPath(folder: Buffer, name: Buffer): Buffer {
  return Buffer.from(join(folder.toString('latin1'), name.toString('latin1')), 'latin1');
}

/** The last part of a path, its bytes unchanged (see joinPath). */
export function baseName(path: Buffer): Buffer {
  return Buffer.from(basename(path.toString('latin1')), 'latin1');
}

/**
 * A path as the table and stderr lines show it: as is when it is UTF-8 without control characters
 * and does not begin with `"`; otherwise quoted (see quotedPath). A name is anyone's input: one
 * with terminal escape sequences must not reach a terminal as such.
 */
export function displayPath(path: Buffer): string {
  const text = path.toString('utf8');
  // biome-ignore lint/suspicious/noControlCharactersInRegex: finding them is the point
  return isUtf8(path) && !text.startsWith('"') && !/[\u0000-\u001f\u007f-\u009f]/.test(text)
    ? text
    : quotedPath(path);
}

/**
 * A path as NDJSON's `path`: JSON carries any text exactly, so the path itself unless it is not
 * UTF-8 (or begins with `"`, so that a quoted form is never mistaken for a name).
 */
export function jsonPath(path: Buffer): string {
  const text = path.toString('utf8');
  return isUtf8(path) && !text.startsWith('"') ? text : quotedPath(path);
}

/**
 * The quoted form, reversible: between double quotes, `"` and `\` escaped as `\"` and `\\`,
 * control characters as JSON escapes them (`\n`, `\u001b`), and each byte that is not part of a
 * UTF-8 character as `\xHH`. Linear in the path's length.
 */
export function quotedPath(path: Buffer): string {
  let text = '"';
  for (let at = 0; at < path.length; ) {
    const length = utf8SequenceLength(path, at);
    if (length === 0) {
      text += `\\x${(path[at] ?? 0).toString(16).padStart(2, '0')}`;
      at += 1;
      continue;
    }
    const char = path.toString('utf8', at, at + length);
    text += char === '"' || char === '\\' ? `\\${char}` : escapeControl(char);
    at += length;
  }
  return `${text}"`;
}

/** A control character (C0, DEL, C1) as a JSON escape; any other character as is. */
export function escapeControl(char: string): string {
  const code = char.charCodeAt(0);
  if (char.length !== 1 || (code > 0x1f && (code < 0x7f || code > 0x9f))) return char;
  const short: Record<string, string> = { '\b': 'b', '\t': 't', '\n': 'n', '\f': 'f', '\r': 'r' };
  const letter = short[char];
  return letter === undefined ? `\\u${code.toString(16).padStart(4, '0')}` : `\\${letter}`;
}

/** The length of the well-formed UTF-8 character at `at` (RFC 3629), or 0 if there is none. */
function utf8SequenceLength(bytes: Buffer, at: number): number {
  const first = bytes[at] ?? 0;
  if (first < 0x80) return 1;
  // The second byte's range depends on the first (no overlong forms, no surrogates, no code
  // point above U+10FFFF); later bytes are any continuation byte.
  let length: number;
  let low = 0x80;
  let high = 0xbf;
  if (first >= 0xc2 && first <= 0xdf) length = 2;
  else if (first >= 0xe0 && first <= 0xef) {
    length = 3;
    if (first === 0xe0) low = 0xa0;
    if (first === 0xed) high = 0x9f;
  } else if (first >= 0xf0 && first <= 0xf4) {
    length = 4;
    if (first === 0xf0) low = 0x90;
    if (first === 0xf4) high = 0x8f;
  } else return 0;
  if (at + length > bytes.length) return 0;
  const second = bytes[at + 1] ?? 0;
  if (second < low || second > high) return 0;
  for (let next = at + 2; next < at + length; next += 1) {
    const byte = bytes[next] ?? 0;
    if (byte < 0x80 || byte > 0xbf) return 0;
  }
  return length;
}

/**
 * The bytes of paths given on the command line. Node decodes its arguments as UTF-8, each byte
 * that is not UTF-8 becoming U+FFFD, so `report\xff.txt` arrives as `report\uFFFD.txt` and would
 * name another file. On Linux the exact bytes are in /proc/self/cmdline: a path holding U+FFFD
 * takes the argument whose decoding it is. Two different arguments that decode to it cannot be
 * told apart: an error rather than a guess.
 */
export function argumentBytes(paths: string[], cmdline = readCommandLine()): Buffer[] {
  return paths.map((path) => {
    if (!path.includes('\uFFFD') || cmdline === null) return Buffer.from(path);
    const candidates = cmdline.filter((argument) => argument.toString('utf8') === path);
    const distinct = candidates.filter((argument, index) =>
      candidates.slice(0, index).every((earlier) => !earlier.equals(argument)),
    );
    if (distinct.length > 1) {
      throw new AmbiguousArgumentError(
        `${distinct.map(quotedPath).join(' and ')} read alike here: give their folder instead`,
      );
    }
    return distinct[0] ?? Buffer.from(path);
  });
}

/** Two arguments that Node decoded to the same text. */
export class AmbiguousArgumentError extends Error {}

function readCommandLine(): Buffer[] | null {
  let bytes: Buffer;
  try {
    bytes = readFileSync('/proc/self/cmdline');
  } catch {
    return null; // Not Linux: the decoded text is all there is.
  }
  const argumentsFound: Buffer[] = [];
  for (let start = 0; start < bytes.length; ) {
    const end = bytes.indexOf(0, start);
    const stop = end < 0 ? bytes.length : end;
    argumentsFound.push(bytes.subarray(start, stop));
    start = stop + 1;
  }
  return argumentsFound;
}
