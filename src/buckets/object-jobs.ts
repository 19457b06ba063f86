import type { BucketSource, Job } from '../domain/records.js';
import type { ObjectVersion } from './bucket-client.js';

/**
 * An object's job: its location says where it is (`s3://bucket/key`, for the trace and the
 * console), its metadata which source announced it and the version to read; the result keeps
 * the metadata, so a client reading it knows the object.
 */
export function objectJob(
  source: Pick<BucketSource, 'name' | 'bucket'>,
  object: ObjectVersion,
): { location: string; metadata: Record<string, string> } {
  return {
    location: `s3://${source.bucket}/${object.key}`,
    metadata: {
      bucket_source: source.name,
      bucket_key: object.key,
      ...(object.etag === null ? {} : { bucket_etag: object.etag }),
      ...(object.versionId === null ? {} : { bucket_version: object.versionId }),
    },
  };
}

/** The source's name and the object version an object's job reads; null for any other job. */
export function objectOfJob(job: Pick<Job, 'kind' | 'metadata'>): {
  sourceName: string;
  object: ObjectVersion;
} | null {
  const { bucket_source, bucket_key, bucket_etag, bucket_version } = job.metadata;
  if (job.kind !== 'bucket' || bucket_source === undefined || bucket_key === undefined) return null;
  return {
    sourceName: bucket_source,
    object: { key: bucket_key, etag: bucket_etag ?? null, versionId: bucket_version ?? null },
  };
}
