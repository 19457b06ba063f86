import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from 'pino';
import type { Config } from './config.js';
import { type ClamdAddress, ClamdClient } from './engines/clamav/clamd-client.js';
import { DataDirClamd } from './engines/clamav/data-dir-clamd.js';
import { loadDescriptorPassing } from './engines/clamav/descriptor-passing.js';
import { findClamdBinary } from './engines/clamav/managed-clamd.js';
import { ownSignaturesVersion } from './engines/clamav/signatures.js';
import type { ContentEngine } from './engines/engine.js';
import { packageVersion } from './paths.js';
import { EngineVersions } from './processing/verdict-cache.js';
import type { Store } from './store/store.js';

// The engines' part of a service's start (service.ts): clamd, and what a verdict depends on.

/**
 * The most content the engine is set up to scan: the larger of the v2.x upload limit and the v1.0
 * POST limit. v1.0 fetches have no limit of their own and go up to this.
 */
export function engineCapacity(config: Config): number {
  return Math.max(config.maxFileSize, config.legacyMaxPostSize);
}

/**
 * The data dir's managed clamd when ASSAY_CLAMD is `managed` (run here, or by another process on
 * the same data dir, whose socket is then used); null for an external one.
 */
export async function startClamd(
  config: Config,
  logger: Logger,
  onLoadChange?: () => void,
): Promise<DataDirClamd | null> {
  if (config.clamd.mode === 'external') return null;
  const clamdPath = findClamdBinary();
  if (clamdPath === null) {
    throw new Error(
      'clamd is not installed: install it (apt-get install clamav-daemon) or set ASSAY_CLAMD to a running clamd',
    );
  }
  const managed = new DataDirClamd({
    dataDir: config.dataDir,
    clamdPath,
    maxFileSize: engineCapacity(config),
    systemDatabaseDir: config.clamdDatabaseDir,
    operatorSignaturesDir: config.signaturesDir,
    signatureCheckMs: config.signatureCheckMs,
    reload: config.clamdReload,
    imageFuzzyHash: config.clamdImageFuzzyHash,
    logger: logger.child({ component: 'clamd' }),
    onLoadChange,
  });
  await managed.start();
  return managed;
}

/**
 * Whether clamd is the data dir's managed one: run here or by another process on the data dir,
 * or handed to a `--processes` child by its primary.
 */
export function clamdInDataDir(config: Config): boolean {
  return (
    config.clamd.mode === 'managed' ||
    config.clamd.address === join(config.dataDir, 'clamd', 'clamd.sock')
  );
}

/**
 * What a verdict depends on, for the verdict cache's key: Assay's version (its own engines and
 * finding names), the signatures it gave clamd at start, the findings style, each NSFW engine and
 * its threshold, and, read again once ASSAY_ENGINE_VERSIONS_MAX_AGE_MS old, clamd's engine and
 * database versions and the versions Assay sets in the store (`assay admin verdict-cache clear`).
 */
export function engineVersions(
  config: Config,
  clamd: ClamdClient,
  databasesVersion: () => Promise<string>,
  engines: readonly ContentEngine[],
  store: Store,
): EngineVersions {
  const fixed = JSON.stringify({
    assay: packageVersion(),
    ownSignatures: ownSignaturesVersion(),
    findingsStyle: config.findingsStyle,
    unexamined: config.unexamined,
    // Off, fuzzy_img signatures cannot match: verdicts from either side are not the other's.
    imageFuzzyHash: config.clamdImageFuzzyHash,
    engines: engines.map((engine) => `${engine.name}/${engine.category}/${engine.maxBytes}`),
    nsfwImageThreshold: config.nsfw.imageThreshold,
  });
  return new EngineVersions(
    fixed,
    [
      async () => {
        const version = await clamd.version();
        // Read by people in each trace, as well as part of the key.
        const daily =
          version.databaseVersion === null
            ? 'no official databases'
            : `daily ${version.databaseVersion} of ${version.databaseDate?.toISOString() ?? 'an unknown date'}`;
        return `clamd ${version.engine}, ${daily}`;
      },
      // Every database clamd loads (VERSION names only the official daily one).
      async () => `databases ${await databasesVersion()}`,
      async () => `store ${await store.engineVersions.describe()}`,
    ],
    config.engineVersionsMaxAgeMs,
  );
}

/** clamd's engine and database versions for a result's trace: the first two changing parts. */
export async function signatureVersions(versions: EngineVersions | null): Promise<string | null> {
  const parts = versions === null ? null : await versions.changing();
  return parts === null ? null : parts.slice(0, 2).join(', ');
}

/**
 * The service's clamd client. On a unix socket with ASSAY_CLAMD_HANDOFF=file (`auto`: the managed
 * clamd, whose clamd.conf Assay writes), items go to clamd as files (FILDES): larger ones are
 * written under the data folder's `clamd-files` as they arrive. A clamd the operator runs gets
 * streams by default: its StreamMaxLength refuses what is too large, where a file over its
 * MaxFileSize would pass unscanned without AlertExceedsMax.
 */
export async function createClamdClient(
  config: Config,
  address: ClamdAddress,
  logger: Logger,
  idleTimeoutMs?: number,
): Promise<ClamdClient> {
  let descriptorDir: string | undefined;
  const handoff =
    config.clamdHandoff === 'auto'
      ? config.clamd.mode === 'managed'
        ? 'file'
        : 'stream'
      : config.clamdHandoff;
  if (handoff === 'file' && address.kind === 'unix') {
    const { passing, error } = loadDescriptorPassing();
    if (passing === null) {
      logger.warn(
        { error },
        'the native part that hands clamd files is not built (npm ci builds it): items go to clamd as streams',
      );
    } else {
      descriptorDir = join(config.dataDir, 'clamd-files');
      await mkdir(descriptorDir, { recursive: true, mode: 0o700 });
    }
  }
  return new ClamdClient(address, {
    ...(idleTimeoutMs === undefined ? {} : { idleTimeoutMs }),
    ...(descriptorDir === undefined ? {} : { descriptorDir }),
    onDescriptorsRefused: (reply) =>
      logger.warn(
        { reply },
        'clamd failed an item handed to it as a file and then scanned it as a stream: items go to clamd as streams from now on',
      ),
  });
}
