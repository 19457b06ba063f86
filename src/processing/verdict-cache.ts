import { createHash } from 'node:crypto';
import type { Logger } from 'pino';
import type { ClaimedVerdicts, DetectionCategory, ReusableVerdict } from '../domain/records.js';
import type { VerdictsToClaim } from '../store/claimed-verdicts.js';
import { StatementGroups } from '../store/statement-groups.js';
import type { Store } from '../store/store.js';

/**
 * `account`: an item reuses its own account's earlier verdicts; `shared`: any account's (a fast
 * answer then tells one account that another sent the same content); `off`: every item is scanned.
 */
export type VerdictCacheMode = 'account' | 'shared' | 'off';

/** One part of the engines' identity that can change while Assay runs (clamd's VERSION). */
export type VersionSource = () => Promise<string>;

/**
 * What the engines are, as one string: what cannot change while the process runs (Assay's version,
 * its own signatures as given to clamd at start, the findings style, the NSFW engines' settings),
 * then what can (clamd's engine and database versions, from VERSION). The changing parts are read
 * again when the last reading is older than `maxAgeMs` (ASSAY_ENGINE_VERSIONS_MAX_AGE_MS), before a
 * lookup uses them, so a signature or engine update reaches the cache key within that time. A
 * reading counts from when it was asked for, and a key is always read before clamd is sent the end
 * of the stream it scans: a verdict is therefore never stored under versions newer than the ones
 * that scanned it.
 */
export class EngineVersions {
  private reading: { at: number; value: Promise<string[] | null> } | null = null;

  constructor(
    private readonly fixed: string,
    private readonly sources: readonly VersionSource[],
    /** The longest a reading is trusted before it is read again (0: read for every lookup). */
    private readonly maxAgeMs: number,
  ) {}

  /** The engines' identity, or null when a changing part cannot be read (clamd down). */
  async current(): Promise<string | null> {
    const parts = await this.changing();
    return parts === null ? null : [this.fixed, ...parts].join('\n');
  }

  /** The changing parts as last read (each source's, in order), or null when one cannot be read. */
  changing(): Promise<string[] | null> {
    const now = Date.now();
    if (this.reading !== null && now - this.reading.at < this.maxAgeMs) return this.reading.value;
    const value = Promise.all(this.sources.map((source) => source())).then(
      (parts) => parts,
      () => {
        // Not remembered: the next item asks again.
        if (this.reading?.value === value) this.reading = null;
        return null;
      },
    );
    this.reading = { at: now, value };
    return value;
  }

  /** Forgets the last reading: the next lookup reads the versions again (a signature reload). */
  changed(): void {
    this.reading = null;
  }
}

export interface VerdictCacheOptions {
  mode: VerdictCacheMode;
  /** A verdict answers items received at most this long after the item it was scanned for. */
  ttlMs: number;
}

/**
 * Finds the complete verdict of an earlier item with the same content (SHA-256), categories,
 * engines and signature versions (and, by default, account), so the content need not be scanned
 * again. Verdicts are stored with their results (`files.verdict_key`, written in the result's
 * transaction by ResultRecorder); errors and partial verdicts get no key, nor do results that
 * reused one (the TTL counts from the scan, not from its reuses).
 */
/** Key suffixes kept (one per account and signature set in use); all dropped past it. */
const KEY_SUFFIXES = 1024;

export class VerdictCache {
  /** Items looked up together (the jobs of one fetch, concurrent uploads) share a statement. */
  private readonly lookups: StatementGroups<string, ReusableVerdict | null>;
  /** The key's second half by what it is hashed from (account, categories, versions). */
  private readonly keySuffixes = new Map<string, string>();

  constructor(
    store: Store,
    private readonly versions: EngineVersions,
    private readonly options: VerdictCacheOptions,
    private readonly logger: Logger,
  ) {
    this.lookups = new StatementGroups(
      (keys) => store.files.findVerdicts(keys, new Date(Date.now() - options.ttlMs).toISOString()),
      { grouped: store.files.findsVerdictsTogether },
    );
  }

  get enabled(): boolean {
    return this.options.mode !== 'off';
  }

  /**
   * The key an item's verdict is stored and found under; null when verdicts are not reused now
   * (the cache is off, or the engines' versions cannot be read).
   */
  async keyOf(
    accountId: string,
    categories: readonly DetectionCategory[],
    sha256: string,
  ): Promise<string | null> {
    if (!this.enabled) return null;
    const versions = await this.versions.current();
    if (versions === null) return null;
    const scope = this.options.mode === 'shared' ? '*' : accountId;
    const material = ['verdict/2', scope, [...new Set(categories)].sort().join(','), versions].join(
      '\0',
    );
    // The same for every item of an account until the signatures change: hashed once.
    let rest = this.keySuffixes.get(material);
    if (rest === undefined) {
      rest = createHash('sha256').update(material).digest('hex');
      if (this.keySuffixes.size >= KEY_SUFFIXES) this.keySuffixes.clear();
      this.keySuffixes.set(material, rest);
    }
    // The content's hash first: a claim finds its jobs' verdicts by that prefix (VerdictsToClaim).
    return `${sha256}${rest}`;
  }

  /**
   * What a claim of small uploads looks up with its jobs (their content's earlier verdicts, in the
   * claim's own statement on PostgreSQL: a round trip saved per group of items); null when off.
   */
  toClaim(): VerdictsToClaim | null {
    if (!this.enabled) return null;
    return { since: new Date(Date.now() - this.options.ttlMs).toISOString() };
  }

  /**
   * The earlier verdict under `key` within the TTL, or null (a store that fails is a miss).
   * `claimed`: the verdicts of the content found with its job's claim; when they are all there
   * are, the store is not asked again.
   */
  async find(key: string, claimed?: ClaimedVerdicts): Promise<ReusableVerdict | null> {
    if (claimed?.complete) {
      let newest: ReusableVerdict | null = null;
      for (const verdict of claimed.verdicts) {
        if (verdict.key !== key) continue;
        if (newest === null || verdict.receivedAt > newest.receivedAt) newest = verdict;
      }
      return newest;
    }
    try {
      return await this.lookups.get(key);
    } catch (error) {
      this.logger.warn({ err: error }, 'verdict cache lookup failed; scanning the content');
      return null;
    }
  }
}
