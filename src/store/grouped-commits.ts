import type { Store } from './store.js';

interface Pending {
  work: (store: Store) => Promise<unknown>;
  resolve: (value: unknown) => void;
  reject: (error: unknown) => void;
}

/** The most writes one commit carries. */
const MAX_GROUP = 64;

/**
 * Group commit: writes handed over in the same turn of the event loop (or while the previous
 * group commits) run in one transaction, so a busy service pays one commit (SQLite's WAL append,
 * PostgreSQL's round trips and flush) for many items instead of one each. A group that fails is
 * tried again one write per transaction, so one write's failure is its own, not its group's.
 * `durable`: each write resolves only once its commit survives power loss (Store.syncCommits),
 * one sync for the whole group: what a 202 promises, at a fraction of a sync per item.
 */
export class GroupedCommits {
  private readonly pending: Pending[] = [];
  private flushing = false;

  /**
   * @param options.onGroupFailed told why a group's transaction failed (a dropped connection, one
   * write's error) before its writes are tried one at a time.
   */
  constructor(
    private readonly store: Store,
    private readonly options: {
      durable?: boolean;
      onGroupFailed?: (error: unknown, writes: number) => void;
    } = {},
  ) {}

  run<T>(work: (store: Store) => Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.pending.push({ work, resolve: resolve as (value: unknown) => void, reject });
      if (!this.flushing) {
        this.flushing = true;
        setImmediate(() => void this.flush());
      }
    });
  }

  private async flush(): Promise<void> {
    while (this.pending.length > 0) {
      const group = this.pending.splice(0, MAX_GROUP);
      if (group.length === 1) {
        await this.alone(group[0] as Pending);
        continue;
      }
      let results: unknown[];
      try {
        results = await this.store.transaction(async (store) => {
          const out: unknown[] = [];
          for (const item of group) out.push(await item.work(store));
          return out;
        });
      } catch (error) {
        this.options.onGroupFailed?.(error, group.length);
        for (const item of group) await this.alone(item);
        continue;
      }
      try {
        await this.synced();
      } catch (error) {
        for (const item of group) item.reject(error);
        continue;
      }
      for (const [i, item] of group.entries()) item.resolve(results[i]);
    }
    this.flushing = false;
  }

  private async alone(item: Pending): Promise<void> {
    try {
      const result = await this.store.transaction(item.work);
      await this.synced();
      item.resolve(result);
    } catch (error) {
      item.reject(error);
    }
  }

  private async synced(): Promise<void> {
    if (this.options.durable === true) await this.store.syncCommits();
  }
}
