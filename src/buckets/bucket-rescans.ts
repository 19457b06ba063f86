import type { Logger } from 'pino';
import type { BucketSource } from '../domain/records.js';
import { PeriodicTask } from '../periodic-task.js';
import type { Store } from '../store/store.js';
import type { BucketIntake } from './bucket-intake.js';
import type { SourcePresence } from './source-presence.js';

/** How often the signature set is compared with the one clean verdicts were given with. */
export const BUCKET_RESCANS_INTERVAL_MS = 10_000;

export interface RescanSettings {
  /** Seconds: clean verdicts younger than this are scanned again (a source's own window first); 0: never. */
  windowSeconds: number;
  /** Objects per second a source's rescan announces at most. */
  ratePerSecond: number;
  /** Scans a source keeps queued at most. */
  backlog: number;
}

/** What rescans do, for the metrics. */
export interface BucketRescanEvents {
  /** Clean objects of a source whose verdict predates the signature set, within its window. */
  rescanDue(source: BucketSource, objects: number): void;
}

/**
 * Clean objects scanned again when the signatures change: those whose clean verdict is younger
 * than their source's window and was given with another signature set (ServiceTag's digest, which
 * Assay's own upgrades leave alone) are announced again, oldest first, at most `ratePerSecond`
 * per source and never more than the backlog queued. The rescan's result is an ordinary one (its
 * callback goes out); a newly flagged object is re-tagged, quarantined or deleted as its source
 * says, and counted in `assay_bucket_newly_flagged_total`.
 */
export class BucketRescans extends PeriodicTask {
  private lastRound = Date.now();
  private lastSet: string | null = null;

  constructor(
    private readonly store: Store,
    private readonly presence: SourcePresence,
    private readonly intake: BucketIntake,
    private readonly signatureSet: () => Promise<string | null>,
    private readonly settings: RescanSettings,
    private readonly events: BucketRescanEvents,
    private readonly log: Logger,
    intervalMs = BUCKET_RESCANS_INTERVAL_MS,
  ) {
    super(() => this.rescanRound(), intervalMs, log, 'scanning watched objects again');
  }

  private async rescanRound(): Promise<void> {
    const now = Date.now();
    const elapsedSeconds = Math.max(1, (now - this.lastRound) / 1000);
    this.lastRound = now;
    if (!(await this.presence.any())) return;
    const signatures = await this.signatureSet();
    if (signatures === null) return;
    const changed = this.lastSet !== null && this.lastSet !== signatures;
    this.lastSet = signatures;
    for (const source of await this.store.bucketSources.list()) {
      const window = source.rescanWindow ?? this.settings.windowSeconds;
      if (window <= 0) continue;
      const since = new Date(now - window * 1000).toISOString();
      const due = await this.store.bucketObjects.rescansDue(source.id, signatures, since);
      this.events.rescanDue(source, due);
      if (due === 0) continue;
      if (changed) {
        this.log.info(
          {
            source: source.name,
            objects: due,
            seconds: Math.ceil(due / this.settings.ratePerSecond),
          },
          'the signatures changed: scanning clean objects again',
        );
      }
      const room = this.settings.backlog - (await this.store.bucketObjects.inFlight(source.id));
      const allowed = Math.min(room, Math.floor(this.settings.ratePerSecond * elapsedSeconds));
      if (allowed <= 0) continue;
      const candidates = await this.store.bucketObjects.rescanCandidates(
        source.id,
        signatures,
        since,
        allowed,
      );
      for (const object of candidates) {
        await this.intake.announce(
          source,
          { key: object.key, etag: object.etag, versionId: object.versionId, size: object.size },
          'rescan',
        );
      }
    }
  }
}
