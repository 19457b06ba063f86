interface Waiting<V> {
  resolve: (value: V) => void;
  reject: (error: unknown) => void;
}

/** The most keys one statement carries. */
const MAX_GROUP = 64;

/**
 * Lookups handed over in the same turn of the event loop (or while the previous group runs) go to
 * the store as one statement: work that arrives together (the messages of one fetch, the items
 * they carry) pays one round trip instead of one each. `lookup` answers the keys in their order; a
 * failed lookup fails every key of its group.
 */
export class GroupedLookups<K, V> {
  private readonly pending: Array<{ key: K } & Waiting<V>> = [];
  private flushing = false;

  /**
   * @param grouped false: each lookup goes at once, alone (a store in the process, where a
   * statement costs no round trip: waiting a turn of the event loop would only add latency).
   */
  constructor(
    private readonly lookup: (keys: K[]) => Promise<V[]>,
    private readonly grouped = true,
  ) {}

  get(key: K): Promise<V> {
    if (!this.grouped) return this.lookup([key]).then((values) => values[0] as V);
    return new Promise<V>((resolve, reject) => {
      this.pending.push({ key, resolve, reject });
      if (!this.flushing) {
        this.flushing = true;
        setImmediate(() => void this.flush());
      }
    });
  }

  private async flush(): Promise<void> {
    while (this.pending.length > 0) {
      const group = this.pending.splice(0, MAX_GROUP);
      try {
        const values = await this.lookup(group.map((item) => item.key));
        for (const [i, item] of group.entries()) item.resolve(values[i] as V);
      } catch (error) {
        for (const item of group) item.reject(error);
      }
    }
    this.flushing = false;
  }
}
