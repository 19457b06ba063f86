// An object's verdict written as S3 object tags, in the shape GuardDuty Malware Protection for S3
// uses (a status tag a bucket policy can test), merged with the object's own tags: a put replaces
// every tag, and S3 keeps at most 10 per object.

/** What became of an object, in GuardDuty's words. */
export type ScanStatus =
  | 'NO_THREATS_FOUND'
  | 'THREATS_FOUND'
  | 'UNSUPPORTED'
  | 'ACCESS_DENIED'
  | 'FAILED';

export interface Tag {
  Key: string;
  Value: string;
}

export interface VerdictTagNames {
  /** The status (ASSAY_BUCKET_STATUS_TAG): what a bucket policy tests. */
  status: string;
  findings: string;
  time: string;
}

export const DEFAULT_TAG_NAMES: VerdictTagNames = {
  status: 'AssayScanStatus',
  findings: 'AssayScanFindings',
  time: 'AssayScanTime',
};

/** S3's limits: tags per object, and characters of a key and of a value. */
export const MAX_TAGS = 10;
const MAX_VALUE = 256;

export interface ObjectVerdict {
  status: ScanStatus;
  findings: readonly string[];
  /** ISO 8601. */
  scannedAt: string;
}

/**
 * The object's tags with the verdict's: its own tags kept (ours replaced), then the status, the
 * time and the findings as far as S3's 10 tags allow, in that order of need. Null when not even
 * the status fits (the object has 10 tags of its own): the object stays untagged, which a policy
 * that reads only tagged-clean objects keeps closed.
 */
export function mergeVerdictTags(
  own: readonly Tag[],
  verdict: ObjectVerdict,
  names: VerdictTagNames = DEFAULT_TAG_NAMES,
): Tag[] | null {
  const ours = new Set([names.status, names.findings, names.time]);
  const kept = own.filter((tag) => !ours.has(tag.Key));
  const wanted: Tag[] = [
    { Key: names.status, Value: verdict.status },
    { Key: names.time, Value: verdict.scannedAt },
  ];
  if (verdict.findings.length > 0) {
    wanted.push({ Key: names.findings, Value: tagValue(verdict.findings.join(' ')) });
  }
  const room = MAX_TAGS - kept.length;
  if (room < 1) return null;
  return [...kept, ...wanted.slice(0, room)];
}

/** The verdict read back from tags, or null where there is no status tag of ours. */
export function verdictOfTags(
  tags: readonly Tag[],
  names: VerdictTagNames = DEFAULT_TAG_NAMES,
): ScanStatus | null {
  const status = tags.find((tag) => tag.Key === names.status)?.Value;
  return (STATUSES as readonly string[]).includes(status ?? '') ? (status as ScanStatus) : null;
}

const STATUSES: readonly ScanStatus[] = [
  'NO_THREATS_FOUND',
  'THREATS_FOUND',
  'UNSUPPORTED',
  'ACCESS_DENIED',
  'FAILED',
];

/**
 * A tag value S3 accepts: letters, digits, spaces and `+ - = . _ : / @`, at most 256 characters;
 * anything else becomes `_` (a finding's name keeps its shape), and a longer list ends in `...`.
 */
export function tagValue(text: string): string {
  // By code points, as S3 counts: a cut never splits a surrogate pair.
  const safe = Array.from(text.replace(/[^\p{L}\p{N}\s+\-=._:/@]/gu, '_'));
  return safe.length <= MAX_VALUE ? safe.join('') : `${safe.slice(0, MAX_VALUE - 3).join('')}...`;
}

/** A tag key of ours, checked when it is configured: S3's characters, at most 128. */
export function isTagKey(key: string): boolean {
  return /^[\p{L}\p{N}\s+\-=._:/@]{1,128}$/u.test(key) && !key.startsWith('aws:');
}
