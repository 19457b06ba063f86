import type { BucketSettings } from './buckets/bucket-setup.js';
import { DEFAULT_TAG_NAMES, isTagKey } from './buckets/verdict-tags.js';
import { ConfigError, type Env, integer, read } from './config-read.js';

/** Watched buckets' settings (the sources themselves are in the store: `assay admin bucket`). */
export function bucketSettings(env: Env): BucketSettings {
  const status = read(env, 'ASSAY_BUCKET_STATUS_TAG');
  if (
    !isTagKey(status) ||
    status === DEFAULT_TAG_NAMES.time ||
    status === DEFAULT_TAG_NAMES.findings
  ) {
    throw new ConfigError(
      `ASSAY_BUCKET_STATUS_TAG must be an S3 tag key (letters, digits, spaces and + - = . _ : / @, 128 at most, not aws:…) other than AssayScanTime and AssayScanFindings, got "${status}"`,
    );
  }
  return {
    tagNames: { ...DEFAULT_TAG_NAMES, status },
    queueWaitSeconds: integer(env, 'ASSAY_BUCKET_QUEUE_WAIT', 1, 20),
    backlog: integer(env, 'ASSAY_BUCKET_BACKLOG', 1, 10_000),
    rescanWindowSeconds: integer(env, 'ASSAY_BUCKET_RESCAN_WINDOW', 0, 10 * 365 * 86_400),
    rescanRate: integer(env, 'ASSAY_BUCKET_RESCAN_RATE', 1, 10_000),
  };
}
