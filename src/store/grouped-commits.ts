import type { Store } from './store.js';
import { TurnGroups } from './turn-groups.js';

interface Pending {
  work: (store: Store) => Promise<unknown>;
  resolve: (value: unknown) => void;
  reject: (error: unknown) => void;
}

/**
 * Group commit: writes handed over in the same turn of the event loop (or while the previous
 * group commits) run in one transaction, so a busy service pays one commit (SQLite's WAL append,
 * PostgreSQL's round trips and flush) for many items instead of one each. A group that fails is
 * tried again one write per transaction, so one write's failure is its own, not its group's.
 * `durable`: each write resolves only once its commit survives power loss (Store.syncCommits),
 * one sync for the whole group: what a 202 promises, at a fraction of a sync per item.
 */
export class GroupedCommits {
  private readonly groups = new TurnGroups<Pending>((group) => this.commit(group));

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
      this.groups.add({ work, resolve: resolve as (value: unknown) => void, reject });
    });
  }

  private async commit(group: Pending[]): Promise<void> {
    if (group.length === 1) {
      await this.alone(group[0] as Pending);
      return;
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
      return;
    }
    try {
      await this.synced();
    } catch (error) {
      for (const item of group) item.reject(error);
      return;
    }
    for (const [i, item] of group.entries()) item.resolve(results[i]);
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
