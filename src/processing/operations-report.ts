import type { CallbackFailure, NodeHeartbeat, ResultError } from '../domain/operations.js';
import type { BucketSource } from '../domain/records.js';
import type { Store } from '../store/store.js';
import { HEARTBEAT_KEEP_MS } from './node-heartbeat.js';

/** A node not seen for this long is marked stale (it missed several heartbeats). */
export const NODE_STALE_MS = 60_000;
/** The most nodes, result errors and callback failures a report lists. */
const MOST_NODES = 100;
const MOST_ERRORS = 20;
/** The most watched buckets a report shows. */
const MOST_SOURCES = 50;

/** A watched bucket with its objects by status ('scanning' for those in flight). */
export interface WatchedBucket {
  source: BucketSource;
  objects: Record<string, number>;
}

export interface NodeStatus extends NodeHeartbeat {
  /** Not seen for NODE_STALE_MS: stopped without saying so, or unable to reach the store. */
  stale: boolean;
  /** How old the official databases it loaded are; null when unknown. */
  signaturesAgeSeconds: number | null;
  /** Live nodes loaded different databases, and most (or a tie) have others than this one. */
  databasesDiffer: boolean;
  /** The process that made this report. */
  self: boolean;
}

export interface OperationsSnapshot {
  /** Milliseconds since the epoch. */
  at: number;
  /** Live nodes first (most recently seen first), then stale ones. */
  nodes: NodeStatus[];
  queue: {
    /** Jobs any worker may claim now (due, or whose worker's lease ended). */
    due: number;
    /** Jobs running on some worker (their lease not ended). */
    running: number;
    oldestDueSeconds: number;
  };
  callbacks: { pending: number; oldestDueSeconds: number };
  resultErrors: ResultError[];
  callbackFailures: CallbackFailure[];
  /** Watched buckets (the first MOST_SOURCES by name), and whether there are more. */
  buckets: WatchedBucket[];
  moreBuckets: boolean;
}

function secondsSince(now: number, date: string | null): number {
  return date === null ? 0 : Math.max(0, Math.round((now - Date.parse(date)) / 1000));
}

/** The value more of `values` share than any other; null when none does (a tie, or empty). */
function mostCommon(values: readonly string[]): string | null {
  const counts = new Map<string, number>();
  for (const value of values) counts.set(value, (counts.get(value) ?? 0) + 1);
  const ranked = [...counts].sort((a, b) => b[1] - a[1]);
  const [first, second] = ranked;
  return first === undefined || (second !== undefined && second[1] === first[1]) ? null : first[0];
}

/**
 * What an operator sees of the whole service on the console's operations page: every node's
 * heartbeat, the queue and callbacks across workers, and the newest errors of every account.
 * Every query is bounded (counts on indexes, the newest rows through partial indexes).
 */
export class OperationsReport {
  constructor(
    private readonly store: Store,
    /** The heartbeat id of the process answering; null when it writes none. */
    private readonly selfId: string | null,
    private readonly clock: () => number = Date.now,
  ) {}

  async snapshot(): Promise<OperationsSnapshot> {
    const now = this.clock();
    const nowDate = new Date(now).toISOString();
    const [heartbeats, due, running, pending, resultErrors, callbackFailures, sources] =
      await Promise.all([
        this.store.nodeHeartbeats.seenSince(now - HEARTBEAT_KEEP_MS, MOST_NODES),
        this.store.jobs.dueSummary(nowDate),
        this.store.jobs.inFlight(nowDate),
        this.store.callbackReports.pendingSummary(),
        this.store.files.recentErrors(MOST_ERRORS),
        this.store.callbackReports.recentFailures(MOST_ERRORS),
        this.store.bucketSources.list(),
      ]);
    const buckets = await Promise.all(
      sources.slice(0, MOST_SOURCES).map(async (source) => ({
        source,
        objects: await this.store.bucketObjects.countsByStatus(source.id),
      })),
    );
    const isStale = (node: NodeHeartbeat) => now - node.lastSeenAt > NODE_STALE_MS;
    const loaded = heartbeats
      .filter((node) => !isStale(node))
      .flatMap((node) => node.databasesVersion ?? []);
    // With more than one set loaded, a node differs unless it has what most live nodes have.
    const mixed = new Set(loaded).size > 1;
    const usual = mostCommon(loaded);
    const nodes = heartbeats.map((node) => ({
      ...node,
      stale: isStale(node),
      signaturesAgeSeconds:
        node.signaturesDate === null ? null : secondsSince(now, node.signaturesDate),
      databasesDiffer: mixed && node.databasesVersion !== null && node.databasesVersion !== usual,
      self: node.id === this.selfId,
    }));
    return {
      at: now,
      nodes: [...nodes.filter((n) => !n.stale), ...nodes.filter((n) => n.stale)],
      queue: { due: due.count, running, oldestDueSeconds: secondsSince(now, due.oldest) },
      callbacks: { pending: pending.count, oldestDueSeconds: secondsSince(now, pending.oldestDue) },
      resultErrors,
      callbackFailures,
      buckets,
      moreBuckets: sources.length > MOST_SOURCES,
    };
  }
}
