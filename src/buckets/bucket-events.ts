// Object-storage event notifications, as AWS S3 delivers them through SQS (directly or wrapped in
// an SNS notification) and as MinIO posts them to a webhook: the same record shape, keys
// URL-encoded with `+` for a space. Untrusted bytes: the text is bounded before it is parsed, the
// records are counted, and every field is checked before use; each step is linear in the input.

/** The most an event's text may be: SQS messages are at most 256 KiB, MinIO's posts a few KiB. */
export const MAX_EVENT_BYTES = 1024 * 1024;
/** Records in one event: S3 sends one, MinIO a few; more is not an event from either. */
export const MAX_EVENT_RECORDS = 1000;
/** S3's own limit on a key, in UTF-8 bytes. */
const MAX_KEY_BYTES = 1024;

/** An object that was created (or replaced), as an event announces it. */
export interface AnnouncedObject {
  bucket: string;
  key: string;
  /** Bytes, where the event says. */
  size: number | null;
  /** Without its quotes; null where the event has none. */
  etag: string | null;
  /** Set where the bucket keeps versions. */
  versionId: string | null;
  /** Orders events of one key (hex; compared by length, then text). */
  sequencer: string | null;
}

export type BucketEvent =
  /** S3's `s3:TestEvent`, sent once when notifications are configured: nothing to scan. */
  | { kind: 'test' }
  /** The objects created; `ignored` counts the other records (removals, restores...). */
  | { kind: 'records'; objects: AnnouncedObject[]; ignored: number };

/** An event that is not one: the message says what is wrong (it names no credential). */
export class BucketEventError extends Error {
  override readonly name = 'BucketEventError';
}

type Json = Record<string, unknown>;

function isObject(value: unknown): value is Json {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * Parses one event: an S3 event (`{"Records": [...]}`), an S3 test event, an SNS notification
 * whose `Message` is one of those, or MinIO's webhook body (`{"EventName", "Key", "Records"}`).
 */
export function parseBucketEvent(text: string): BucketEvent {
  if (Buffer.byteLength(text) > MAX_EVENT_BYTES) {
    throw new BucketEventError(`the event is over ${MAX_EVENT_BYTES} bytes`);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new BucketEventError('the event is not JSON');
  }
  if (isObject(parsed) && parsed.Type === 'Notification' && typeof parsed.Message === 'string') {
    // SNS between the bucket and the queue: the S3 event is the notification's message.
    return parseBucketEvent(parsed.Message);
  }
  if (!isObject(parsed)) throw new BucketEventError('the event is not a JSON object');
  if (parsed.Event === 's3:TestEvent') return { kind: 'test' };
  const records = parsed.Records;
  if (!Array.isArray(records)) throw new BucketEventError('the event has no Records list');
  if (records.length > MAX_EVENT_RECORDS) {
    throw new BucketEventError(`the event has over ${MAX_EVENT_RECORDS} records`);
  }
  const objects: AnnouncedObject[] = [];
  let ignored = 0;
  records.forEach((record: unknown, index) => {
    const announced = parseRecord(record, index);
    if (announced === null) ignored++;
    else objects.push(announced);
  });
  return { kind: 'records', objects, ignored };
}

/** One record: the object it announces, or null for an event other than a creation. */
function parseRecord(record: unknown, index: number): AnnouncedObject | null {
  const where = `record ${index}`;
  if (!isObject(record)) throw new BucketEventError(`${where} is not an object`);
  const name = record.eventName;
  if (typeof name !== 'string') throw new BucketEventError(`${where} has no eventName`);
  // AWS says `ObjectCreated:Put`, MinIO `s3:ObjectCreated:Put`.
  if (!/^(s3:)?ObjectCreated:/.test(name)) return null;
  const s3 = record.s3;
  if (!isObject(s3) || !isObject(s3.bucket) || !isObject(s3.object)) {
    throw new BucketEventError(`${where} has no s3.bucket and s3.object`);
  }
  const bucket = s3.bucket.name;
  if (typeof bucket !== 'string' || !/^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/.test(bucket)) {
    throw new BucketEventError(`${where} has no valid bucket name`);
  }
  const object = s3.object;
  if (typeof object.key !== 'string') throw new BucketEventError(`${where} has no object key`);
  const key = decodeKey(object.key, where);
  return {
    bucket,
    key,
    size: optionalSize(object.size, where),
    etag: optionalText(object.eTag, `${where}'s eTag`, 256)?.replace(/^"|"$/g, '') ?? null,
    versionId: optionalText(object.versionId, `${where}'s versionId`, 1024),
    sequencer: optionalText(object.sequencer, `${where}'s sequencer`, 64),
  };
}

/** Event keys are URL-encoded as a form value: `+` is a space, `%2B` a plus. */
export function decodeKey(encoded: string, where = 'the key'): string {
  let key: string;
  try {
    key = decodeURIComponent(encoded.replaceAll('+', ' '));
  } catch {
    throw new BucketEventError(`${where}: the object key is not URL-encoded text`);
  }
  if (key.length === 0 || Buffer.byteLength(key) > MAX_KEY_BYTES) {
    throw new BucketEventError(`${where}: the object key is empty or over ${MAX_KEY_BYTES} bytes`);
  }
  return key;
}

function optionalSize(value: unknown, where: string): number | null {
  if (value === undefined || value === null) return null;
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0) {
    throw new BucketEventError(`${where}'s size is not a whole number of bytes`);
  }
  return value;
}

function optionalText(value: unknown, what: string, maxLength: number): string | null {
  if (value === undefined || value === null || value === '') return null;
  if (typeof value !== 'string' || value.length > maxLength) {
    throw new BucketEventError(`${what} is not text of at most ${maxLength} characters`);
  }
  return value;
}
