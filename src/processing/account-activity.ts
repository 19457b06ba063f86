import type { Store } from '../store/store.js';

export interface DayActivity {
  /** `YYYY-MM-DD`, UTC. */
  day: string;
  items: number;
  /** Items with at least one finding. */
  flagged: number;
}

const DAY_MS = 86_400_000;

/** What an account's items did over time, for the console's overview. */
export class AccountActivity {
  constructor(
    private readonly store: Store,
    private readonly clock: () => number = Date.now,
  ) {}

  /** The last `days` UTC days, today included, oldest first; a day without items counts 0. */
  async daily(accountId: string, days = 30): Promise<DayActivity[]> {
    const today = Math.floor(this.clock() / DAY_MS) * DAY_MS;
    const first = today - (days - 1) * DAY_MS;
    const counted = new Map(
      (await this.store.files.dailyCounts(accountId, new Date(first).toISOString())).map((row) => [
        row.day,
        row,
      ]),
    );
    return Array.from({ length: days }, (_, index) => {
      const day = new Date(first + index * DAY_MS).toISOString().slice(0, 10);
      return counted.get(day) ?? { day, items: 0, flagged: 0 };
    });
  }
}
