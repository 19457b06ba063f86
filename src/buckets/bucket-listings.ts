import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';
import type { BucketSource } from '../domain/records.js';
import { PeriodicTask } from '../periodic-task.js';
import type { Store } from '../store/store.js';
import type { BucketClients } from './bucket-clients.js';
import type { BucketIntake } from './bucket-intake.js';
import type { SourcePresence } from './source-presence.js';

/** How often a requested (or orphaned) listing is looked for. */
const LISTINGS_INTERVAL_MS = 1_000;
/** How long a listing waits for its backlog to shrink before it looks again. */
const BACKLOG_WAIT_MS = 250;

/** What listings do, for the metrics. */
export interface BucketListingEvents {
  listed(source: BucketSource, objects: number): void;
}

/**
 * Full listings of watched buckets (`assay admin bucket scan`), for a first scan and as a fallback
 * for lost events: one process lists a source at a time (a lease), page by page from its
 * checkpoint, so a listing cut short by a crash resumes where it was; each object is announced
 * (an object already scanned with the same ETag is not queued again). A listing keeps at most
 * `backlog` of its source's scans queued: a bulk import waits its turn instead of filling the
 * queue ahead of everything else.
 */
export class BucketListings extends PeriodicTask {
  private stopping = false;

  constructor(
    private readonly store: Store,
    private readonly presence: SourcePresence,
    private readonly clients: BucketClients,
    private readonly intake: BucketIntake,
    private readonly options: {
      backlog: number;
      pageSize: number;
      /** A listing's lease (ASSAY_JOB_LEASE): extended at each page and while it waits; a dead process's listing resumes after it. */
      leaseMs: number;
    },
    private readonly events: BucketListingEvents,
    private readonly log: Logger,
  ) {
    super(() => this.listRequested(), LISTINGS_INTERVAL_MS, log, 'listing watched buckets');
  }

  override async stop(): Promise<void> {
    this.stopping = true;
    await super.stop();
  }

  private async listRequested(): Promise<void> {
    if (!(await this.presence.any())) return;
    for (;;) {
      if (this.stopping) return;
      const source = await this.store.bucketSources.claimListing(Date.now(), this.options.leaseMs);
      if (source === null) return;
      await this.list(source);
    }
  }

  private async list(source: BucketSource): Promise<void> {
    const client = this.clients.client(source);
    let after = source.listing.after;
    this.log.info({ source: source.name, after }, 'listing a watched bucket');
    for (;;) {
      if (!(await this.waitForRoom(source))) return;
      const page = await client.list(after, this.options.pageSize);
      for (const object of page.objects) {
        await this.intake.announce(
          source,
          { key: object.key, etag: object.etag, versionId: null, size: object.size },
          'listing',
        );
      }
      after = page.objects.at(-1)?.key ?? after;
      this.events.listed(source, page.objects.length);
      const kept = await this.store.bucketSources.checkpointListing(
        source.id,
        after,
        page.objects.length,
        Date.now(),
        this.options.leaseMs,
      );
      // Asked again from the start meanwhile (or taken over): this pass ends here.
      if (!kept) return;
      if (page.next === null) {
        await this.store.bucketSources.finishListing(source.id, new Date().toISOString());
        this.log.info({ source: source.name }, 'listed a watched bucket');
        return;
      }
    }
  }

  /** Waits while the source has `backlog` scans queued; false when the service stops or the listing was lost. */
  private async waitForRoom(source: BucketSource): Promise<boolean> {
    for (;;) {
      if (this.stopping) return false;
      if ((await this.store.bucketObjects.inFlight(source.id)) < this.options.backlog) return true;
      await sleep(BACKLOG_WAIT_MS);
      if (
        !(await this.store.bucketSources.extendListing(source.id, Date.now(), this.options.leaseMs))
      ) {
        return false;
      }
    }
  }
}
