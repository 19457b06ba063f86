import { randomUUID } from 'node:crypto';
import type { DetectionCategory, LegacyFormat, StoredFile } from '../domain/records.js';

/** The deprecated v1.0 result: one document per scan, in JSON, XML or YAML. */
export interface LegacyResult {
  status: 'clean' | 'infected' | 'oops' | 'pending';
  /** Present when infected: the names of what was found. */
  virus?: string[];
  /** Present when oops: why there is no verdict. */
  reason?: string;
  /** SHA-1 of the content, when it is known. */
  checksum?: string;
  /** The item's id in UUID form: quoted in support tickets and read back by status. */
  request_id: string;
}

/** v1.0 is a malware API (`clean`/`infected`): only MALWARE runs, whatever else the key has. */
export const LEGACY_CATEGORIES: readonly DetectionCategory[] = ['MALWARE'];

export const LEGACY_FORMATS: readonly LegacyFormat[] = ['json', 'xml', 'yaml'];

const HEX_ID = /^[0-9a-f]{32}$/;

/**
 * A file id that is also a version 4 UUID, so a v1.0 item's `request_id` is a real UUID and the
 * same item reads as `/v2.x/files/<id>` too.
 */
export function newLegacyId(): string {
  return randomUUID().replaceAll('-', '');
}

/** 32 hex characters in UUID form (8-4-4-4-12). */
export function requestIdOf(fileId: string): string {
  return `${fileId.slice(0, 8)}-${fileId.slice(8, 12)}-${fileId.slice(12, 16)}-${fileId.slice(16, 20)}-${fileId.slice(20)}`;
}

/** The file id of a request id in UUID form (or bare 32 hex); null when it is neither. */
export function fileIdOf(requestId: string): string | null {
  const lower = requestId.toLowerCase();
  const bare = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/.test(lower)
    ? lower.replaceAll('-', '')
    : lower;
  return HEX_ID.test(bare) ? bare : null;
}

/**
 * v1.0 names what it found by the signature alone: `content.malicious.eicar-test-signature` (or
 * the older `av.…`) is `eicar-test-signature`. Findings of other categories keep their full name.
 */
function virusName(finding: string): string {
  return finding.replace(/^(?:content\.malicious|av)\./, '');
}

/** A recorded item as v1.0 reads it; an item without a verdict is `oops`, never clean. */
export function legacyResultOf(file: StoredFile): LegacyResult {
  const request_id = requestIdOf(file.id);
  const checksum = file.checksum === null ? {} : { checksum: file.checksum };
  if (file.findings === null) {
    return { status: 'oops', reason: file.error ?? 'not processed', ...checksum, request_id };
  }
  if (file.findings.length > 0) {
    return { status: 'infected', virus: file.findings.map(virusName), ...checksum, request_id };
  }
  return { status: 'clean', ...checksum, request_id };
}

export function pendingResult(fileId: string, checksum: string | null): LegacyResult {
  return {
    status: 'pending',
    ...(checksum === null ? {} : { checksum }),
    request_id: requestIdOf(fileId),
  };
}

/** XML 1.0 cannot carry some characters at all, not even escaped: they become U+FFFD. */
function xmlChar(char: string): string {
  const code = char.codePointAt(0) ?? 0;
  const allowed =
    code === 0x9 ||
    code === 0xa ||
    code === 0xd ||
    (code >= 0x20 && code <= 0xd7ff) ||
    (code >= 0xe000 && code <= 0xfffd) ||
    code >= 0x10000;
  return allowed ? char : '\ufffd';
}

function xmlText(value: string): string {
  return Array.from(value, xmlChar)
    .join('')
    .replaceAll('&', '&amp;')
    .replaceAll('<', '&lt;')
    .replaceAll('>', '&gt;');
}

function toXml(result: LegacyResult): string {
  const children = Object.entries(result).flatMap(([name, value]: [string, string | string[]]) =>
    [value].flat().map((item) => `<${name}>${xmlText(item)}</${name}>`),
  );
  return `<?xml version="1.0" encoding="UTF-8"?>\n<response>${children.join('')}</response>\n`;
}

/**
 * What YAML may not carry raw even in a quoted scalar: DEL and the C1 controls (not printable in
 * YAML; a strict parser refuses them), the line and paragraph separators (line breaks to a YAML
 * 1.1 parser, which would fold them away), the byte order mark and the two non-characters.
 * JSON.stringify leaves them raw; YAML's \u escape is the same as JSON's.
 */
const YAML_UNPRINTABLE = /[\u007f-\u009f\u2028\u2029\ufeff\ufffe\uffff]/g;

/** A double-quoted YAML scalar: JSON's syntax, which YAML reads as the same string. */
function yamlString(value: string): string {
  return JSON.stringify(value).replace(
    YAML_UNPRINTABLE,
    (char) => `\\u${(char.codePointAt(0) ?? 0).toString(16).padStart(4, '0')}`,
  );
}

/** Block YAML; every scalar double-quoted. */
function toYaml(result: LegacyResult): string {
  const lines = Object.entries(result).flatMap(([name, value]: [string, string | string[]]) =>
    Array.isArray(value)
      ? [`${name}:`, ...value.map((item) => `  - ${yamlString(item)}`)]
      : [`${name}: ${yamlString(value)}`],
  );
  return `${lines.join('\n')}\n`;
}

/** The body and media type of a v1.0 document in the requested format. */
export function renderLegacy(
  result: LegacyResult,
  format: LegacyFormat,
): { body: string; contentType: string } {
  if (format === 'xml')
    return { body: toXml(result), contentType: 'application/xml; charset=utf-8' };
  if (format === 'yaml') {
    return { body: toYaml(result), contentType: 'application/yaml; charset=utf-8' };
  }
  return { body: JSON.stringify(result), contentType: 'application/json' };
}
