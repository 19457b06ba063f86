import type { Kysely, Selectable } from 'kysely';
import type { NodeHeartbeat } from '../domain/operations.js';
import type { Database, NodeHeartbeatsTable } from './schema.js';

function toHeartbeat(row: Selectable<NodeHeartbeatsTable>): NodeHeartbeat {
  return {
    id: row.id,
    host: row.host,
    pid: Number(row.pid),
    role: row.role,
    version: row.version,
    clamdVersion: row.clamd_version,
    signaturesVersion: row.signatures_version === null ? null : Number(row.signatures_version),
    signaturesDate: row.signatures_date,
    ownSignaturesVersion: row.own_signatures_version,
    databasesVersion: row.databases_version,
    runningJobs: row.running_jobs === null ? null : Number(row.running_jobs),
    startedAt: Number(row.started_at),
    lastSeenAt: Number(row.last_seen_at),
  };
}

/** Each process's latest heartbeat: one row per process, written over every few seconds. */
export class NodeHeartbeatRepository {
  constructor(private readonly db: Kysely<Database>) {}

  async write(node: NodeHeartbeat): Promise<void> {
    const values = {
      host: node.host,
      pid: node.pid,
      role: node.role,
      version: node.version,
      clamd_version: node.clamdVersion,
      signatures_version: node.signaturesVersion,
      signatures_date: node.signaturesDate,
      own_signatures_version: node.ownSignaturesVersion,
      databases_version: node.databasesVersion,
      running_jobs: node.runningJobs,
      started_at: node.startedAt,
      last_seen_at: node.lastSeenAt,
    };
    await this.db
      .insertInto('node_heartbeats')
      .values({ id: node.id, ...values })
      .onConflict((conflict) => conflict.column('id').doUpdateSet(values))
      .execute();
  }

  /** The nodes seen since `since`, most recently seen first, at most `limit`. */
  async seenSince(since: number, limit: number): Promise<NodeHeartbeat[]> {
    const rows = await this.db
      .selectFrom('node_heartbeats')
      .selectAll()
      .where('last_seen_at', '>=', since)
      .orderBy('last_seen_at', 'desc')
      .orderBy('id')
      .limit(limit)
      .execute();
    return rows.map(toHeartbeat);
  }

  async delete(id: string): Promise<void> {
    await this.db.deleteFrom('node_heartbeats').where('id', '=', id).execute();
  }

  /** Removes the rows of nodes not seen since `before`; returns how many. */
  async deleteSeenBefore(before: number): Promise<number> {
    const result = await this.db
      .deleteFrom('node_heartbeats')
      .where('last_seen_at', '<', before)
      .executeTakeFirst();
    return Number(result.numDeletedRows);
  }
}
