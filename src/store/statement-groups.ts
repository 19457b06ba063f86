import { TurnGroups } from './turn-groups.js';

interface Waiting<K, V> {
  key: K;
  resolve: (value: V) => void;
  reject: (error: unknown) => void;
}

export interface StatementGroupOptions<K, V> {
  /**
   * false: each key goes at once, alone (a store in the process, where a statement costs no round
   * trip: waiting a turn of the event loop would only add latency). Default true.
   */
  grouped?: boolean;
  /**
   * Answers one key alone: a group whose statement fails is tried again one key at a time through
   * it, so one key's failure is its own. Without it, every key of a failed group fails.
   */
  alone?: (key: K) => Promise<V>;
  /** Told why a group's statement failed, before its keys are tried alone. */
  onGroupFailed?: (error: unknown, size: number) => void;
}

/**
 * Keys handed over in the same turn of the event loop (or while the previous group runs) go to
 * the store as one statement (TurnGroups): work that arrives together (the items of one fetch,
 * concurrent submissions, results finishing together) pays one round trip instead of one each.
 * `statement` answers the keys in their order.
 */
export class StatementGroups<K, V> {
  private readonly groups: TurnGroups<Waiting<K, V>>;
  private readonly grouped: boolean;

  constructor(
    private readonly statement: (keys: K[]) => Promise<V[]>,
    private readonly options: StatementGroupOptions<K, V> = {},
  ) {
    this.grouped = options.grouped ?? true;
    this.groups = new TurnGroups((group) => this.run(group));
  }

  get(key: K): Promise<V> {
    if (!this.grouped) {
      return this.options.alone?.(key) ?? this.statement([key]).then((values) => values[0] as V);
    }
    return new Promise<V>((resolve, reject) => this.groups.add({ key, resolve, reject }));
  }

  private async run(group: Array<Waiting<K, V>>): Promise<void> {
    try {
      const values = await this.statement(group.map((item) => item.key));
      for (const [i, item] of group.entries()) item.resolve(values[i] as V);
    } catch (error) {
      const { alone, onGroupFailed } = this.options;
      if (alone === undefined || group.length === 1) {
        for (const item of group) item.reject(error);
        return;
      }
      onGroupFailed?.(error, group.length);
      for (const item of group) await alone(item.key).then(item.resolve, item.reject);
    }
  }
}
