import { type Kysely, sql } from 'kysely';
import type { Database } from './schema.js';

/** An account's deliveries to one destination. */
export interface LaneRef {
  accountId: string;
  destination: string;
}

/** A lane's circuit: failed attempts in a row, times it opened in a row, open until (ms). */
export interface LaneCircuit {
  failures: number;
  opens: number;
  openUntil: number;
}

/** The lane row that stands for its whole account: the lock its admissions take in turn. */
const ACCOUNT_ROW = '*';

const CLOSED: LaneCircuit = { failures: 0, opens: 0, openUntil: 0 };

/**
 * Callback limits in the store, for processes that deliver from one database: a row per delivery
 * in flight (`callback_admissions`, until its lease ends) and a circuit per lane that has failed
 * (`callback_lanes`). The rules are the caller's (`SharedDestinationGate`); these are its reads
 * and writes, run in its transaction.
 */
export class CallbackLaneRepository {
  constructor(private readonly db: Kysely<Database>) {}

  /**
   * Serializes the account's admissions until the transaction ends: an upsert of its row locks
   * it on PostgreSQL (SQLite's transactions take the write lock at their start anyway).
   */
  async lockAccount(accountId: string, now: number): Promise<void> {
    await this.db
      .insertInto('callback_lanes')
      .values({ account_id: accountId, destination: ACCOUNT_ROW, last_used: now })
      .onConflict((conflict) =>
        conflict.columns(['account_id', 'destination']).doUpdateSet({ last_used: now }),
      )
      .execute();
  }

  async circuit(lane: LaneRef): Promise<LaneCircuit> {
    const row = await this.db
      .selectFrom('callback_lanes')
      .select(['failures', 'opens', 'open_until'])
      .where('account_id', '=', lane.accountId)
      .where('destination', '=', lane.destination)
      .executeTakeFirst();
    if (row === undefined) return CLOSED;
    return { failures: row.failures, opens: row.opens, openUntil: Number(row.open_until) };
  }

  /** Deliveries in flight now: the account's, and those of them in the lane. */
  async inFlight(lane: LaneRef, now: number): Promise<{ account: number; lane: number }> {
    const row = await this.db
      .selectFrom('callback_admissions')
      .select([
        sql<number | string>`count(*)`.as('account'),
        sql<
          number | string | null
        >`sum(case when destination = ${lane.destination} then 1 else 0 end)`.as('lane'),
      ])
      .where('account_id', '=', lane.accountId)
      .where('lease_until', '>', now)
      .executeTakeFirst();
    return { account: Number(row?.account ?? 0), lane: Number(row?.lane ?? 0) };
  }

  /**
   * Counts a delivery as in flight in its lane until `leaseUntil` (ms) or its release; false,
   * counting nothing, while it is still in flight under an earlier admission (another process
   * found it due too). Admitted twice, the loser's release would free the winner's place.
   */
  async admit(
    deliveryId: string,
    lane: LaneRef,
    now: number,
    leaseUntil: number,
  ): Promise<boolean> {
    const values = {
      account_id: lane.accountId,
      destination: lane.destination,
      lease_until: leaseUntil,
    };
    const row = await this.db
      .insertInto('callback_admissions')
      .values({ delivery_id: deliveryId, ...values })
      .onConflict((conflict) =>
        conflict
          .column('delivery_id')
          .doUpdateSet(values)
          .where('callback_admissions.lease_until', '<=', now),
      )
      .returning('delivery_id')
      .executeTakeFirst();
    return row !== undefined;
  }

  async release(deliveryId: string): Promise<void> {
    await this.db.deleteFrom('callback_admissions').where('delivery_id', '=', deliveryId).execute();
  }

  /** Stores a lane's circuit after an attempt; a closed one leaves no row. */
  async saveCircuit(lane: LaneRef, circuit: LaneCircuit, now: number): Promise<void> {
    const where = this.db
      .deleteFrom('callback_lanes')
      .where('account_id', '=', lane.accountId)
      .where('destination', '=', lane.destination);
    if (circuit.failures === 0 && circuit.opens === 0) {
      await where.execute();
      return;
    }
    const values = {
      failures: circuit.failures,
      opens: circuit.opens,
      open_until: circuit.openUntil,
      last_used: now,
    };
    await this.db
      .insertInto('callback_lanes')
      .values({ account_id: lane.accountId, destination: lane.destination, ...values })
      .onConflict((conflict) => conflict.columns(['account_id', 'destination']).doUpdateSet(values))
      .execute();
  }

  /**
   * What takes no delivery now: accounts with `accountLimit` deliveries in flight, and lanes with
   * `laneLimit`, or with one while their circuit is open or probing. One read of the admissions
   * in flight (a few rows: the deliveries running now).
   */
  async busy(
    now: number,
    limits: { accountLimit: number; laneLimit: number },
  ): Promise<{ accounts: string[]; lanes: LaneRef[] }> {
    const rows = await this.db
      .selectFrom('callback_admissions as a')
      .leftJoin('callback_lanes as l', (join) =>
        join
          .onRef('l.account_id', '=', 'a.account_id')
          .onRef('l.destination', '=', 'a.destination'),
      )
      .select([
        'a.account_id',
        'a.destination',
        sql<number | string>`count(*)`.as('running'),
        sql<number | string>`max(coalesce(l.opens, 0))`.as('opens'),
      ])
      .where('a.lease_until', '>', now)
      .groupBy(['a.account_id', 'a.destination'])
      .execute();
    const perAccount = new Map<string, number>();
    const lanes: LaneRef[] = [];
    for (const row of rows) {
      const running = Number(row.running);
      perAccount.set(row.account_id, (perAccount.get(row.account_id) ?? 0) + running);
      if (running >= limits.laneLimit || Number(row.opens) > 0) {
        lanes.push({ accountId: row.account_id, destination: row.destination });
      }
    }
    const accounts = [...perAccount]
      .filter(([, running]) => running >= limits.accountLimit)
      .map(([account]) => account);
    return { accounts, lanes };
  }

  /**
   * Forgets admissions whose lease ended (their process died mid-attempt) and lanes unused since
   * `before` whose circuit is closed again by then, so failing lanes cannot pile up.
   */
  async forget(now: number, before: number): Promise<void> {
    await this.db.deleteFrom('callback_admissions').where('lease_until', '<=', now).execute();
    await this.db
      .deleteFrom('callback_lanes')
      .where('last_used', '<', before)
      .where('open_until', '<', before)
      .execute();
  }
}
