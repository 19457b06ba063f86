import { randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import {
  DeleteObjectCommand,
  GetObjectCommand,
  HeadBucketCommand,
  PutObjectCommand,
  paginateListObjectsV2,
  S3Client,
} from '@aws-sdk/client-s3';
import { Upload } from '@aws-sdk/lib-storage';
import {
  SpooledContentError,
  SpoolTooLargeError,
  SpoolUnavailableError,
} from '../domain/failures.js';
import { noteStreamedBytes } from '../stream-memory.js';
import type { ContentSpool } from './content-spool.js';
import type { S3Location } from './s3-url.js';
import { SpoolHealth } from './spool-health.js';

/**
 * A failed S3 request of the spool; the message names the bucket, the key and what S3 said: for
 * the log and the operator (init), so what reaches clients wraps it (SpoolUnavailableError...).
 */
export class S3SpoolError extends Error {
  /** 'ENOENT' for a missing key, as a missing spool file would say. */
  readonly code: string | undefined;

  constructor(message: string, cause: unknown, code?: string) {
    super(message, { cause });
    this.code = code;
  }
}

export interface S3SpoolOptions extends S3Location {
  /** An S3-compatible server's URL (path-style addressing); '' for AWS itself. */
  endpoint: string;
  region: string;
  /** Bytes buffered per part of a multipart upload (at least S3's minimum of 5 MiB). */
  partSize?: number;
  /** Parts uploaded at once: a write holds about (queueSize + 1) × partSize in memory. */
  queueSize?: number;
  connectTimeoutMs?: number;
  /** A connection that moves no bytes this long fails (so a silent server cannot hang a job). */
  idleTimeoutMs?: number;
  /** Attempts of each request, retries of throttling and network failures included. */
  maxAttempts?: number;
  /** Keys per ListObjectsV2 page (S3's maximum is 1000). */
  listPageSize?: number;
}

/** S3 refuses smaller parts (but the last). */
const S3_MIN_PART_SIZE = 5 * 1024 * 1024;
export const S3_PART_SIZE = 8 * 1024 * 1024;
const S3_QUEUE_SIZE = 2;

/** ContentSpool keys are job ids; anything else under the prefix is not ours to touch. */
const KEY = /^[A-Za-z0-9_-]{1,128}$/;

const now = () => performance.now();

/** The HTTP status S3 answered with; undefined when it did not answer (refused, reset, timed out). */
function httpStatusOf(error: unknown): number | undefined {
  return (error as { $metadata?: { httpStatusCode?: number } } | undefined)?.$metadata
    ?.httpStatusCode;
}

function errorName(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const code = (error as { code?: unknown }).code;
  const status = httpStatusOf(error);
  const what =
    typeof code === 'string' && code !== error.name ? `${error.name} ${code}` : error.name;
  return `${what}${status === undefined ? '' : ` (HTTP ${status})`}: ${error.message}`;
}

/** A missing key (a bucket that is gone is not: that is an outage). */
function isMissing(error: unknown): boolean {
  if (!(error instanceof Error) || error.name === 'NoSuchBucket') return false;
  return error.name === 'NoSuchKey' || error.name === 'NotFound' || httpStatusOf(error) === 404;
}

/**
 * The spool in an S3 bucket, shared by every process that names the same bucket and prefix.
 * Content streams in parts of `partSize` (multipart upload), never whole in memory; an upload is
 * invisible until it completes, so readers never see partial content, and durability is S3's.
 * Credentials come from the SDK's default chain (AWS_ACCESS_KEY_ID…, profiles, instance roles).
 */
export class S3Spool implements ContentSpool {
  readonly describe: string;
  private readonly client: S3Client;
  private readonly bucket: string;
  private readonly prefix: string;
  private readonly partSize: number;
  private readonly queueSize: number;
  private readonly listPageSize: number;
  private readonly health: SpoolHealth;

  constructor(options: S3SpoolOptions) {
    this.bucket = options.bucket;
    this.prefix = options.prefix;
    this.partSize = Math.max(S3_MIN_PART_SIZE, options.partSize ?? S3_PART_SIZE);
    this.queueSize = Math.max(1, options.queueSize ?? S3_QUEUE_SIZE);
    this.listPageSize = options.listPageSize ?? 1000;
    const where = `s3://${this.bucket}${this.prefix === '' ? '' : `/${this.prefix}`}`;
    const custom = options.endpoint !== '';
    this.describe = custom ? `${where} at ${new URL(options.endpoint).origin}` : where;
    this.client = new S3Client({
      region: options.region,
      ...(custom
        ? {
            endpoint: options.endpoint,
            // S3-compatible servers rarely have a wildcard DNS name per bucket.
            forcePathStyle: true,
            // Many S3-compatible servers reject the SDK's default checksum headers.
            requestChecksumCalculation: 'WHEN_REQUIRED' as const,
            responseChecksumValidation: 'WHEN_REQUIRED' as const,
          }
        : {}),
      maxAttempts: options.maxAttempts ?? 3,
      requestHandler: {
        connectionTimeout: options.connectTimeoutMs ?? 10_000,
        socketTimeout: options.idleTimeoutMs ?? 120_000,
      },
    });
    this.health = new SpoolHealth({
      quick: (signal) => this.headBucket(signal),
      thorough: (signal) => this.probeWrite(signal),
    });
  }

  private async headBucket(signal: AbortSignal): Promise<void> {
    await this.client.send(new HeadBucketCommand({ Bucket: this.bucket }), { abortSignal: signal });
  }

  /** An empty object written and removed; its name is no spool key, so the sweep ignores it. */
  private async probeWrite(signal: AbortSignal): Promise<void> {
    const name = `.probe-${randomBytes(8).toString('hex')}`;
    const Key = this.prefix === '' ? name : `${this.prefix}/${name}`;
    await this.client.send(
      new PutObjectCommand({ Bucket: this.bucket, Key, Body: '', ContentLength: 0 }),
      {
        abortSignal: signal,
      },
    );
    await this.client.send(new DeleteObjectCommand({ Bucket: this.bucket, Key }), {
      abortSignal: signal,
    });
  }

  check(): Promise<void> {
    return this.health.check();
  }

  /**
   * A read failed: the item's when the key is missing, or when S3 answered with an error and the
   * bucket answers a check made after the failure; else an outage. A request S3 never answered
   * (refused, reset, timed out) is the outage's even when the bucket is back before the check.
   */
  private async readFailure(error: S3SpoolError, failedAt: number): Promise<Error> {
    if (error.code === 'ENOENT') return new SpooledContentError(true, error);
    if (error.cause instanceof Error && httpStatusOf(error.cause) === undefined) {
      this.health.noteFailure(error);
      return new SpoolUnavailableError('reading', error);
    }
    return this.health.readFailure(error, failedAt, false);
  }

  private objectKey(key: string): string {
    if (!KEY.test(key)) throw new Error(`S3 spool: invalid key "${key}"`);
    return this.prefix === '' ? key : `${this.prefix}/${key}`;
  }

  private failure(action: string, error: unknown): S3SpoolError {
    return new S3SpoolError(
      `S3 spool ${this.describe}: ${action} failed: ${errorName(error)}`,
      error,
      isMissing(error) ? 'ENOENT' : undefined,
    );
  }

  /** Checks that the bucket answers, so a wrong name or credential fails at start, not per job. */
  async init(): Promise<void> {
    try {
      await this.client.send(new HeadBucketCommand({ Bucket: this.bucket }));
    } catch (error) {
      throw this.failure(`checking bucket ${this.bucket}`, error);
    }
  }

  async write(
    key: string,
    source: AsyncIterable<Buffer>,
    maxBytes: number,
  ): Promise<{ key: string; size: number }> {
    const objectKey = this.objectKey(key);
    let size = 0;
    // Errors of the source (too large, a client gone) are rethrown as they are, not as S3's.
    let sourceError: { error: unknown } | null = null;
    const counted = async function* (): AsyncGenerator<Buffer> {
      try {
        for await (const chunk of source) {
          size += chunk.length;
          if (size > maxBytes) {
            throw new SpoolTooLargeError(`the content exceeds the limit of ${maxBytes} bytes`);
          }
          yield chunk;
          noteStreamedBytes(chunk.length);
        }
      } catch (error) {
        sourceError = { error };
        throw error;
      }
    };
    const body = Readable.from(counted(), { objectMode: false });
    const upload = new Upload({
      client: this.client,
      params: { Bucket: this.bucket, Key: objectKey, Body: body },
      partSize: this.partSize,
      queueSize: this.queueSize,
      // A failed upload aborts its multipart upload, so no parts are left billed and hidden.
      leavePartsOnError: false,
    });
    try {
      await upload.done();
    } catch (error) {
      // Stops reading the source when S3 failed first (the source's own cleanup runs).
      body.destroy();
      // A failure after S3 completed the object (a lost response) must not leave it behind.
      await this.remove(key).catch(() => {});
      const failed = sourceError as { error: unknown } | null;
      if (failed === null) {
        this.health.noteFailure(error);
        throw new SpoolUnavailableError('writing', this.failure(`writing ${objectKey}`, error));
      }
      // S3 failed too (a part, or the abort after the source's error): keep its error as the cause.
      if (
        failed.error !== error &&
        failed.error instanceof Error &&
        failed.error.cause === undefined
      )
        failed.error.cause = this.failure(`uploading ${objectKey}`, error);
      throw failed.error;
    }
    this.health.noteSuccess();
    return { key, size };
  }

  read(key: string): Readable {
    const abort = new AbortController();
    const fetch = async function* (spool: S3Spool): AsyncGenerator<Buffer> {
      const objectKey = spool.objectKey(key);
      // What a failure means, unless the reader closed the stream (it aborts the request).
      const failure = (error: S3SpoolError) =>
        abort.signal.aborted ? error : spool.readFailure(error, now());
      let body: unknown;
      try {
        const response = await spool.client.send(
          new GetObjectCommand({ Bucket: spool.bucket, Key: objectKey }),
          { abortSignal: abort.signal },
        );
        body = response.Body;
      } catch (error) {
        throw await failure(spool.failure(`reading ${objectKey}`, error));
      }
      if (!(body instanceof Readable)) {
        throw await failure(
          new S3SpoolError(`S3 spool ${spool.describe}: ${objectKey} has no body`, undefined),
        );
      }
      try {
        for await (const chunk of body) yield chunk as Buffer;
      } catch (error) {
        throw await failure(spool.failure(`reading ${objectKey}`, error));
      }
    };
    // Lazy: nothing is requested until the stream is read; closing it early aborts the request.
    const stream = Readable.from(fetch(this), { objectMode: false, highWaterMark: 1024 * 1024 });
    stream.once('close', () => abort.abort());
    return stream;
  }

  async remove(key: string): Promise<void> {
    const objectKey = this.objectKey(key);
    try {
      await this.client.send(new DeleteObjectCommand({ Bucket: this.bucket, Key: objectKey }));
    } catch (error) {
      // S3 answers 204 for a missing key; some compatible servers say 404.
      if (isMissing(error)) return;
      throw new SpoolUnavailableError('removing', this.failure(`removing ${objectKey}`, error));
    }
  }

  /**
   * Removes objects under the prefix older than `graceMs` (by S3's LastModified, so keep the grace
   * well above any clock skew between S3 and Assay) whose key `isReferenced` does not know.
   */
  async removeOrphans(
    graceMs: number,
    isReferenced: (key: string) => Promise<boolean>,
  ): Promise<{ files: number; bytes: number }> {
    const removed = { files: 0, bytes: 0 };
    const before = Date.now() - graceMs;
    const listPrefix = this.prefix === '' ? '' : `${this.prefix}/`;
    const pages = paginateListObjectsV2(
      { client: this.client, pageSize: this.listPageSize },
      { Bucket: this.bucket, Prefix: listPrefix },
    )[Symbol.asyncIterator]();
    for (;;) {
      let page: Awaited<ReturnType<typeof pages.next>>;
      try {
        page = await pages.next();
      } catch (error) {
        throw this.failure(`listing ${listPrefix || '/'}`, error);
      }
      if (page.done === true) break;
      for (const object of page.value.Contents ?? []) {
        const key = (object.Key ?? '').slice(listPrefix.length);
        if (!KEY.test(key)) continue;
        const modified = object.LastModified?.getTime();
        if (modified === undefined || modified >= before) continue;
        if (await isReferenced(key)) continue;
        await this.remove(key);
        removed.files += 1;
        removed.bytes += object.Size ?? 0;
      }
    }
    return removed;
  }

  /** Object storage does not fill up as a disk does. */
  async diskFull(_uploadBytes: number): Promise<boolean> {
    return false;
  }

  async hasRoom(_bytes: number): Promise<boolean> {
    return true;
  }

  noteDiskFull(): void {}

  /** Closes the client's connections (tests, shutdown). */
  close(): void {
    this.client.destroy();
  }
}
