import type { Logger } from 'pino';
import type { BucketMetrics } from '../metrics/bucket-metrics.js';
import type { Intake } from '../processing/intake.js';
import { ServiceTag } from '../processing/service-tag.js';
import type { Store } from '../store/store.js';
import { BucketClients } from './bucket-clients.js';
import { BucketIntake, type SourcePrincipals } from './bucket-intake.js';
import { BucketListings } from './bucket-listings.js';
import { BucketObjectReader } from './bucket-object-reader.js';
import { BucketQueues } from './bucket-queues.js';
import { BucketRescans } from './bucket-rescans.js';
import { BucketVerdicts } from './bucket-verdicts.js';
import { BucketWebhooks } from './bucket-webhooks.js';
import { SourcePresence } from './source-presence.js';
import type { VerdictTagNames } from './verdict-tags.js';

/** ASSAY_BUCKET_* settings. */
export interface BucketSettings {
  tagNames: VerdictTagNames;
  /** Seconds an SQS receive waits (long polling). */
  queueWaitSeconds: number;
  /** Scans a listing or a rescan keeps queued per source at most. */
  backlog: number;
  /** Clean verdicts younger than this are scanned again when the signatures change; 0: never. */
  rescanWindowSeconds: number;
  /** Objects per second a source's rescan announces at most. */
  rescanRate: number;
}

/** The settings watched buckets share with the job runner. */
export interface BucketJobSettings {
  /** ASSAY_JOB_LEASE: listings and write-backs are leased like jobs. */
  leaseMs: number;
}

/** What watched buckets need from the rest of the service, once its intake exists. */
export interface BucketDependencies {
  principals: SourcePrincipals;
  intake: Intake;
  /** The changing parts of the engines' identity (EngineVersions.changing), null while unknown. */
  signatureParts: () => Promise<readonly string[] | null>;
  metrics: BucketMetrics;
}

/** Test hooks: how often verdicts are collected and written back. */
export interface BucketTestHooks {
  verdictsIntervalMs?: number;
  /** How often the signature set is compared for rescans. */
  rescansIntervalMs?: number;
}

/**
 * The bucket front door (issue 42), a room beside http/ and icap/: the reader of objects for the
 * jobs' download stage (available at once: the job runner is made with it), then, once the
 * service's intake exists, the announcements (webhook events here; SQS queues and the write-back
 * of verdicts in the processes that run jobs).
 */
export class BucketFrontDoor {
  readonly objects: BucketObjectReader;
  private readonly clients: BucketClients;
  private intake: BucketIntake | null = null;
  private verdicts: BucketVerdicts | null = null;
  private queues: BucketQueues | null = null;
  private listings: BucketListings | null = null;
  private rescans: BucketRescans | null = null;

  constructor(
    private readonly store: Store,
    private readonly settings: BucketSettings & BucketJobSettings,
    private readonly logger: Logger,
    private readonly hooks: BucketTestHooks = {},
  ) {
    this.clients = new BucketClients(store, {
      connectTimeoutMs: 10_000,
      idleTimeoutMs: 120_000,
      maxAttempts: 3,
    });
    this.objects = new BucketObjectReader(this.clients);
  }

  /** Announcements through the service's intake; returns the webhooks the HTTP routes serve. */
  connect(dependencies: BucketDependencies): BucketWebhooks {
    const tag = new ServiceTag(dependencies.signatureParts);
    const { metrics } = dependencies;
    this.intake = new BucketIntake(
      this.store,
      dependencies.principals,
      dependencies.intake,
      () => tag.signatureSet(),
      (source, origin, outcome) => metrics.objectAnnounced(source, origin, outcome),
    );
    const presence = new SourcePresence(this.store);
    this.verdicts = new BucketVerdicts(
      this.store,
      presence,
      this.clients,
      this.intake,
      this.settings.tagNames,
      metrics,
      this.logger,
      this.settings.leaseMs,
      this.hooks.verdictsIntervalMs,
    );
    this.queues = new BucketQueues(
      this.store,
      this.intake,
      { waitSeconds: this.settings.queueWaitSeconds, connectTimeoutMs: 10_000 },
      metrics,
      this.logger,
    );
    this.listings = new BucketListings(
      this.store,
      presence,
      this.clients,
      this.intake,
      {
        backlog: this.settings.backlog,
        pageSize: Math.min(1000, this.settings.backlog),
        leaseMs: this.settings.leaseMs,
      },
      metrics,
      this.logger,
    );
    this.rescans = new BucketRescans(
      this.store,
      presence,
      this.intake,
      () => tag.signatureSet(),
      {
        windowSeconds: this.settings.rescanWindowSeconds,
        ratePerSecond: this.settings.rescanRate,
        backlog: this.settings.backlog,
      },
      metrics,
      this.logger,
      this.hooks.rescansIntervalMs,
    );
    return new BucketWebhooks(this.clients, this.intake);
  }

  /** The queues, listings, rescans and the write-back of verdicts: in the processes that run jobs. */
  async start(): Promise<void> {
    await this.verdicts?.start();
    await this.queues?.start();
    await this.listings?.start();
    await this.rescans?.start();
  }

  async stop(): Promise<void> {
    await this.rescans?.stop();
    await this.listings?.stop();
    await this.queues?.stop();
    await this.verdicts?.stop();
    this.clients.close();
  }
}
