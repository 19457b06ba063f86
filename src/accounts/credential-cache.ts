/**
 * Records read from the store on every request (keys, accounts, tokens), kept for `ttlMs`: a
 * change made elsewhere (another process, the admin CLI) is seen within that time; a change made
 * through this process forgets the entry at once. At most `maxEntries` are kept (oldest go
 * first), so a stream of unknown ids cannot grow it.
 */
export class CredentialCache<V> {
  private readonly entries = new Map<string, { value: V; until: number }>();

  constructor(
    private readonly ttlMs: number,
    private readonly maxEntries = 10_000,
  ) {}

  async get(id: string, load: () => Promise<V>): Promise<V> {
    const now = Date.now();
    const entry = this.entries.get(id);
    if (entry !== undefined && entry.until > now) return entry.value;
    const value = await load();
    this.entries.delete(id);
    if (this.entries.size >= this.maxEntries) {
      const oldest = this.entries.keys().next();
      if (oldest.done !== true) this.entries.delete(oldest.value);
    }
    // A TTL of 0 keeps nothing: every read goes to the store.
    if (this.ttlMs > 0) this.entries.set(id, { value, until: now + this.ttlMs });
    return value;
  }

  forget(id: string): void {
    this.entries.delete(id);
  }

  clear(): void {
    this.entries.clear();
  }
}
