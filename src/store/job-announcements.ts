import type { Kysely } from 'kysely';
import type { JobStage } from '../domain/records.js';
import type { Database } from './schema.js';
import { type DueWork, type WorkDispatch, withDispatch } from './work-dispatch.js';

/** Leases read per look for ended ones (JobAnnouncements.announceEndedLeases). */
const LEASE_SWEEP_ROWS = 100;

/** Jobs looked up at once for an announcement already waiting (JobAnnouncements.redispatch). */
const REDISPATCH_PAGE = 500;

/** A job's rank counts its account's other jobs up to this many: the count stays cheap. */
const RANK_LIMIT = 1000;

/**
 * Sends `work` through `dispatch` ranked behind the account's other jobs in its stage (waiting or
 * running), so that accounts take turns: an account with one job running and more waiting lets
 * another account's first job go before its second, as the embedded store's round-robin does.
 */
export async function announce(
  db: Kysely<Database>,
  dispatch: WorkDispatch | undefined,
  work: Omit<DueWork, 'rank'> & { kind: JobStage },
  ranks?: Map<string, number>,
): Promise<void> {
  if (dispatch === undefined) return;
  // Jobs inserted one after another in one transaction (a group commit's submissions): each ranks
  // one behind the account's previous one, counted once (the count read up to 1000 index entries).
  const rankKey = `${work.kind}\0${work.accountId}`;
  const known = ranks?.get(rankKey);
  if (known !== undefined) {
    const rank = Math.min(RANK_LIMIT, known + 1);
    ranks?.set(rankKey, rank);
    await dispatch.send(db, { ...work, rank });
    return;
  }
  const waiting = db
    .selectFrom('jobs')
    .select('id')
    .where('stage', '=', work.kind)
    .where('account_id', '=', work.accountId)
    .where('id', '!=', work.id)
    .limit(RANK_LIMIT)
    .as('waiting');
  const row = await db
    .selectFrom(waiting)
    .select((eb) => eb.fn.countAll<number>().as('count'))
    .executeTakeFirst();
  const rank = Number(row?.count ?? 0);
  ranks?.set(rankKey, rank);
  await dispatch.send(db, { ...work, rank });
}

/**
 * Announces jobs again through the dispatch (pg-boss on PostgreSQL): at a worker's start what no
 * live worker holds, and the jobs whose worker died (their lease ended unrenewed).
 */
export class JobAnnouncements {
  constructor(
    private readonly db: Kysely<Database>,
    private readonly dispatch: WorkDispatch,
  ) {}

  /**
   * Announces jobs again, each due at its `run_after`: one (`id`), or at start every job no live
   * worker holds (`unheldAt`: rows written without a dispatch, say by `migrate-store`), except
   * those with an announcement waiting already.
   */
  async redispatch(which: { unheldAt: string } | { id: string }): Promise<number> {
    const dispatch = this.dispatch;
    let query = this.db.selectFrom('jobs').select(['id', 'account_id', 'stage', 'run_after']);
    if ('unheldAt' in which) {
      const now = which.unheldAt;
      query = query.where((eb) => eb.or([eb('state', '=', 'pending'), eb('run_after', '<=', now)]));
    } else {
      query = query.where('id', '=', which.id);
    }
    const rows = await query.orderBy('run_after').execute();
    if ('id' in which) {
      await this.announceRows(dispatch, rows, { dropHeld: false });
      return rows.length;
    }
    await this.dropUnheldMessages();
    // At start: a backlog announced before is mostly waiting already (a worker that restarts would
    // otherwise send every pending job again: two statements each). Asked in pages.
    let announced = 0;
    for (let from = 0; from < rows.length; from += REDISPATCH_PAGE) {
      const page = rows.slice(from, from + REDISPATCH_PAGE);
      const missing: typeof page = [];
      for (const stage of new Set(page.map((row) => row.stage as JobStage))) {
        const ofStage = page.filter((row) => row.stage === stage);
        const waiting =
          (await dispatch.waiting?.(
            this.db,
            stage,
            ofStage.map((row) => row.id),
          )) ?? new Set<string>();
        missing.push(...ofStage.filter((row) => !waiting.has(row.id)));
      }
      await this.announceRows(dispatch, missing, { dropHeld: false });
      announced += missing.length;
    }
    return announced;
  }

  /**
   * At a worker's start: drops the active messages of jobs no claim holds. A worker that dies
   * between putting its job back (its next message sent with it) and completing its message leaves
   * that message active, counted in its account's group until pg-boss's monitor finds its
   * heartbeat stale (a minute or two): a few of them fill the group and stop the account's jobs.
   * A live worker's message is active a moment before its claim too; dropping it is harmless (the
   * claim goes on, and completing a dropped message changes nothing).
   */
  private async dropUnheldMessages(): Promise<void> {
    for (const stage of ['scan', 'download'] as const) {
      const running = (await this.dispatch.running?.(this.db, stage)) ?? [];
      if (running.length === 0) continue;
      const held = await this.db
        .selectFrom('jobs')
        .select('id')
        .where('id', 'in', running)
        .where('state', '=', 'processing')
        .where('stage', '=', stage)
        .execute();
      const heldIds = new Set(held.map((row) => row.id));
      await this.dispatch.dropHeld?.(
        this.db,
        stage,
        running.filter((id) => !heldIds.has(id)),
      );
    }
  }

  /**
   * Announces each row again, due at its `run_after`, each in a transaction of its own;
   * `dropHeld`: first dropping what a dead worker still holds of its announcement.
   */
  private async announceRows(
    dispatch: WorkDispatch,
    rows: Array<{ id: string; account_id: string; stage: string; run_after: string }>,
    { dropHeld }: { dropHeld: boolean },
  ): Promise<void> {
    for (const row of rows) {
      const work = { kind: row.stage as JobStage, id: row.id, accountId: row.account_id };
      await withDispatch(this.db, dispatch, async (db) => {
        if (dropHeld) await dispatch.dropHeld?.(db, work.kind, [work.id]);
        await announce(db, dispatch, { ...work, at: row.run_after });
      });
    }
  }

  /**
   * Announces the jobs whose lease ended by `now` (their worker died), and says when the earliest
   * lease still running ends: when to look again. One read of the leases in order of their end.
   */
  async announceEndedLeases(now: string): Promise<{ announced: number; nextEnd: string | null }> {
    const dispatch = this.dispatch;
    const rows = await this.db
      .selectFrom('jobs')
      .select(['id', 'account_id', 'stage', 'run_after'])
      .where('state', '=', 'processing')
      .orderBy('run_after')
      .limit(LEASE_SWEEP_ROWS)
      .execute();
    const ended = rows.filter((row) => row.run_after <= now);
    await this.announceRows(dispatch, ended, { dropHeld: true });
    // All of them ended: there may be more; look again at once.
    const next = rows.length === ended.length && rows.length === LEASE_SWEEP_ROWS ? now : null;
    return { announced: ended.length, nextEnd: next ?? rows[ended.length]?.run_after ?? null };
  }
}
