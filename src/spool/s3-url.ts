// Parsing of ASSAY_SPOOL_URL, apart from the S3 client so that reading the configuration does not
// load the AWS SDK.

export interface S3Location {
  bucket: string;
  /** Without leading or trailing slash; '' for the bucket's root. */
  prefix: string;
}

/** S3's bucket naming rules (3-63 of a-z 0-9 . -, starting and ending with a letter or digit). */
const BUCKET = /^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/;
/** Prefix segments: printable, no `.`/`..` segments, nothing a URL would reinterpret. */
const PREFIX_SEGMENT = /^[A-Za-z0-9!_.*'()-]+$/;

/** `s3://bucket/prefix` to its bucket and prefix; throws an Error saying what is wrong. */
export function parseS3Url(raw: string): S3Location {
  const match = /^s3:\/\/([^/?#]*)(?:\/([^?#]*))?$/.exec(raw);
  if (match === null) throw new Error(`must be s3://bucket or s3://bucket/prefix, got "${raw}"`);
  const bucket = match[1] ?? '';
  if (!BUCKET.test(bucket) || bucket.includes('..')) {
    throw new Error(`has an invalid bucket name "${bucket}" (3-63 of a-z 0-9 . -)`);
  }
  const prefix = (match[2] ?? '').replace(/\/+$/, '');
  if (prefix !== '') {
    for (const segment of prefix.split('/')) {
      if (!PREFIX_SEGMENT.test(segment) || segment === '.' || segment === '..') {
        throw new Error(
          `has an invalid prefix "${prefix}" (segments of A-Z a-z 0-9 ! _ . * ' ( ) -)`,
        );
      }
    }
  }
  return { bucket, prefix };
}
