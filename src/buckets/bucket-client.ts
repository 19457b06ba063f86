import type { Readable } from 'node:stream';
import type { S3Client } from '@aws-sdk/client-s3';
import type { BucketSource } from '../domain/records.js';
import type { Tag } from './verdict-tags.js';

/** What S3's refusal means for an object: why it cannot be read, or an outage to wait out. */
export type BucketFailure = 'denied' | 'unsupported' | 'missing' | 'changed' | 'outage';

/** A failed S3 request of a watched bucket; `failure` says what it means, the message what S3 said. */
export class BucketRequestError extends Error {
  override readonly name = 'BucketRequestError';

  constructor(
    readonly failure: BucketFailure,
    doing: string,
    cause: unknown,
  ) {
    super(`${doing}: ${describe(cause)}`, { cause });
  }
}

function statusOf(error: unknown): number | undefined {
  return (error as { $metadata?: { httpStatusCode?: number } } | undefined)?.$metadata
    ?.httpStatusCode;
}

function describe(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const status = statusOf(error);
  return `${error.name}${status === undefined ? '' : ` (HTTP ${status})`}`;
}

/** S3's answer, sorted: what the object is to blame for, and what is the service's outage. */
export function failureOf(error: unknown): BucketFailure {
  if (!(error instanceof Error)) return 'outage';
  const status = statusOf(error);
  // Encrypted with a KMS key this service may not use: GuardDuty calls that unsupported.
  if (/KMS/i.test(error.name) || (status === 403 && /KMS/i.test(error.message)))
    return 'unsupported';
  if (error.name === 'AccessDenied' || status === 403) return 'denied';
  if (error.name === 'NoSuchBucket') return 'outage';
  if (error.name === 'NoSuchKey' || error.name === 'NotFound' || status === 404) return 'missing';
  if (error.name === 'PreconditionFailed' || status === 412) return 'changed';
  return 'outage';
}

/** Static credentials, as the SDK takes them. */
interface StaticCredentials {
  accessKeyId: string;
  secretAccessKey: string;
  sessionToken?: string;
}

/** `env:NAME`: NAME_ACCESS_KEY_ID and NAME_SECRET_ACCESS_KEY (and NAME_SESSION_TOKEN) now. */
export function credentialsOf(
  which: string,
  env: NodeJS.ProcessEnv = process.env,
): StaticCredentials | undefined {
  if (which === 'default') return undefined;
  const name = which.slice('env:'.length);
  const accessKeyId = env[`${name}_ACCESS_KEY_ID`];
  const secretAccessKey = env[`${name}_SECRET_ACCESS_KEY`];
  if (accessKeyId === undefined || secretAccessKey === undefined) {
    throw new BucketRequestError(
      'outage',
      'reading credentials',
      new Error(`${name}_ACCESS_KEY_ID and ${name}_SECRET_ACCESS_KEY are not both set`),
    );
  }
  const sessionToken = env[`${name}_SESSION_TOKEN`];
  return { accessKeyId, secretAccessKey, ...(sessionToken === undefined ? {} : { sessionToken }) };
}

/** Where an object's version is pinned: the version where the bucket keeps them, else its ETag. */
export interface ObjectVersion {
  key: string;
  etag: string | null;
  versionId: string | null;
}

export interface ObjectHead {
  etag: string | null;
  versionId: string | null;
  size: number;
}

export interface ListedPage {
  objects: Array<{ key: string; etag: string | null; size: number }>;
  /** The last key of the page: the next page starts after it; null at the end. */
  next: string | null;
}

/** Timeouts a watched bucket's requests get (a silent server never holds a job). */
export interface BucketClientOptions {
  connectTimeoutMs: number;
  idleTimeoutMs: number;
  maxAttempts: number;
}

type S3Sdk = typeof import('@aws-sdk/client-s3');
let s3Sdk: Promise<S3Sdk> | null = null;

/**
 * The S3 SDK, imported on a watched bucket's first request: imported at start, it cost every
 * service, watching buckets or not, ~3.5 MB of live heap and ~12 MB of RSS under load (with the
 * SQS SDK).
 */
function loadS3Sdk(): Promise<S3Sdk> {
  // A failed import is forgotten, so that the next request tries again instead of failing for
  // the life of the process.
  s3Sdk ??= import('@aws-sdk/client-s3').catch((error: unknown) => {
    s3Sdk = null;
    throw error;
  });
  return s3Sdk;
}

/**
 * One watched bucket's S3 requests, each failure a BucketRequestError that says what it means.
 * Reads stream (nothing is held whole in memory) and are pinned to the announced version.
 */
export class BucketClient {
  private client: S3Client | null = null;
  private readonly credentials: StaticCredentials | undefined;

  constructor(
    private readonly source: BucketSource,
    private readonly options: BucketClientOptions,
  ) {
    this.credentials = credentialsOf(source.credentials);
  }

  private connect(sdk: S3Sdk): S3Client {
    if (this.client !== null) return this.client;
    const { source, options } = this;
    const custom = source.endpoint !== '';
    this.client = new sdk.S3Client({
      region: source.region,
      credentials: this.credentials,
      ...(custom
        ? {
            endpoint: source.endpoint,
            // S3-compatible servers rarely have a wildcard DNS name per bucket.
            forcePathStyle: true,
            requestChecksumCalculation: 'WHEN_REQUIRED' as const,
            responseChecksumValidation: 'WHEN_REQUIRED' as const,
          }
        : {}),
      maxAttempts: options.maxAttempts,
      requestHandler: {
        connectionTimeout: options.connectTimeoutMs,
        socketTimeout: options.idleTimeoutMs,
      },
    });
    return this.client;
  }

  /** `request` with the client and the SDK's commands; a failure as a BucketRequestError. */
  private async send<T>(
    doing: string,
    request: (client: S3Client, sdk: S3Sdk) => Promise<T>,
  ): Promise<T> {
    try {
      const sdk = await loadS3Sdk();
      return await request(this.connect(sdk), sdk);
    } catch (error) {
      throw new BucketRequestError(failureOf(error), doing, error);
    }
  }

  /** The object's content as announced: 'changed' when it was replaced since. */
  async read(
    object: ObjectVersion,
    signal?: AbortSignal,
  ): Promise<{ body: AsyncIterable<Buffer>; size: number }> {
    const answer = await this.send(`reading ${object.key}`, (client, sdk) =>
      client.send(
        new sdk.GetObjectCommand({
          Bucket: this.source.bucket,
          Key: object.key,
          ...(object.versionId !== null
            ? { VersionId: object.versionId }
            : object.etag !== null
              ? { IfMatch: `"${object.etag}"` }
              : {}),
        }),
        { abortSignal: signal },
      ),
    );
    return { body: answer.Body as Readable, size: answer.ContentLength ?? 0 };
  }

  /** The object now; null when it is gone. */
  async head(key: string): Promise<ObjectHead | null> {
    try {
      const answer = await this.send(`reading the head of ${key}`, (client, sdk) =>
        client.send(new sdk.HeadObjectCommand({ Bucket: this.source.bucket, Key: key })),
      );
      return {
        etag: answer.ETag?.replace(/^"|"$/g, '') ?? null,
        versionId: answer.VersionId ?? null,
        size: answer.ContentLength ?? 0,
      };
    } catch (error) {
      if (error instanceof BucketRequestError && error.failure === 'missing') return null;
      throw error;
    }
  }

  async tags(object: ObjectVersion): Promise<Tag[]> {
    const answer = await this.send(`reading the tags of ${object.key}`, (client, sdk) =>
      client.send(
        new sdk.GetObjectTaggingCommand({
          Bucket: this.source.bucket,
          Key: object.key,
          ...(object.versionId === null ? {} : { VersionId: object.versionId }),
        }),
      ),
    );
    return (answer.TagSet ?? []).map((tag) => ({ Key: tag.Key ?? '', Value: tag.Value ?? '' }));
  }

  async putTags(object: ObjectVersion, tags: readonly Tag[]): Promise<void> {
    await this.send(`tagging ${object.key}`, (client, sdk) =>
      client.send(
        new sdk.PutObjectTaggingCommand({
          Bucket: this.source.bucket,
          Key: object.key,
          ...(object.versionId === null ? {} : { VersionId: object.versionId }),
          Tagging: { TagSet: [...tags] },
        }),
      ),
    );
  }

  /** A copy of the object (its tags with it) at `bucket/key`. */
  async copyTo(object: ObjectVersion, bucket: string, key: string): Promise<void> {
    const source = `${this.source.bucket}/${encodeURIComponent(object.key).replaceAll('%2F', '/')}`;
    await this.send(`copying ${object.key} to ${bucket}`, (client, sdk) =>
      client.send(
        new sdk.CopyObjectCommand({
          Bucket: bucket,
          Key: key,
          CopySource:
            object.versionId === null
              ? source
              : `${source}?versionId=${encodeURIComponent(object.versionId)}`,
          TaggingDirective: 'COPY',
          ...(object.versionId === null && object.etag !== null
            ? { CopySourceIfMatch: `"${object.etag}"` }
            : {}),
        }),
      ),
    );
  }

  /** Removes the object (that version, where the bucket keeps versions). */
  async remove(object: ObjectVersion): Promise<void> {
    await this.send(`deleting ${object.key}`, (client, sdk) =>
      client.send(
        new sdk.DeleteObjectCommand({
          Bucket: this.source.bucket,
          Key: object.key,
          ...(object.versionId === null ? {} : { VersionId: object.versionId }),
        }),
      ),
    );
  }

  /** A page of the source's keys after `after` (its prefix only), in key order. */
  async list(after: string | null, pageSize: number): Promise<ListedPage> {
    const answer = await this.send('listing the bucket', (client, sdk) =>
      client.send(
        new sdk.ListObjectsV2Command({
          Bucket: this.source.bucket,
          ...(this.source.prefix === '' ? {} : { Prefix: this.source.prefix }),
          ...(after === null ? {} : { StartAfter: after }),
          MaxKeys: pageSize,
        }),
      ),
    );
    const objects = (answer.Contents ?? []).flatMap((entry) =>
      entry.Key === undefined
        ? []
        : [
            {
              key: entry.Key,
              etag: entry.ETag?.replace(/^"|"$/g, '') ?? null,
              size: entry.Size ?? 0,
            },
          ],
    );
    const last = objects.at(-1)?.key ?? null;
    return { objects, next: answer.IsTruncated === true ? last : null };
  }

  close(): void {
    this.client?.destroy();
  }
}
