import { join } from 'node:path';
import type { ContentSpool } from './content-spool.js';
import { LocalSpool } from './local-spool.js';
import { parseS3Url } from './s3-url.js';

export interface SpoolSettings {
  dataDir: string;
  /** A shared directory (ASSAY_SPOOL_DIR); '' for the data directory's `spool`. */
  spoolDir: string;
  /** `s3://bucket/prefix` (ASSAY_SPOOL_URL); '' for a directory. */
  spoolUrl: string;
  /** An S3-compatible server (ASSAY_S3_ENDPOINT); '' for AWS. */
  s3Endpoint: string;
  /** ASSAY_S3_REGION; us-east-1 when absent. */
  s3Region?: string;
}

/**
 * The spool the settings name: an S3 bucket when ASSAY_SPOOL_URL is set, else a directory (the
 * shared one, or the data directory's). The S3 adapter (and the AWS SDK) is
 * loaded only when used.
 */
export async function openSpool(
  settings: SpoolSettings,
  makeLocal: (dir: string) => ContentSpool = (dir) => new LocalSpool(dir),
): Promise<ContentSpool> {
  if (settings.spoolUrl !== '') {
    const { S3Spool } = await import('./s3-spool.js');
    return new S3Spool({
      ...parseS3Url(settings.spoolUrl),
      endpoint: settings.s3Endpoint,
      region: settings.s3Region ?? 'us-east-1',
    });
  }
  return makeLocal(settings.spoolDir !== '' ? settings.spoolDir : join(settings.dataDir, 'spool'));
}
