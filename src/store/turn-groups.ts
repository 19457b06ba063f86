/** The most items one group carries. */
const MAX_GROUP = 64;

/**
 * Items handed over in the same turn of the event loop (or while the previous group is written)
 * form one group, written by `write` (one statement, one transaction): the mechanics that
 * StatementGroups, GroupedCommits and ResultRecorder share. `write` settles each item itself and
 * never rejects.
 */
export class TurnGroups<T> {
  private readonly pending: T[] = [];
  private flushing = false;

  constructor(private readonly write: (group: T[]) => Promise<void>) {}

  add(item: T): void {
    this.pending.push(item);
    if (!this.flushing) {
      this.flushing = true;
      setImmediate(() => void this.flush());
    }
  }

  private async flush(): Promise<void> {
    while (this.pending.length > 0) await this.write(this.pending.splice(0, MAX_GROUP));
    this.flushing = false;
  }
}
