import type { Kysely } from 'kysely';
import type { Database } from './schema.js';

/**
 * Versions Assay sets itself (`verdict-cache`: a new value retires every stored verdict), read by
 * every process into the verdict cache's key beside clamd's own versions.
 */
export class EngineVersionRepository {
  constructor(private readonly db: Kysely<Database>) {}

  /** Every version, as `name=version` in name order (empty when none was ever set). */
  async describe(): Promise<string> {
    const rows = await this.db
      .selectFrom('engine_versions')
      .select(['name', 'version'])
      .orderBy('name')
      .execute();
    return rows.map((row) => `${row.name}=${row.version}`).join(',');
  }

  async set(name: string, version: string): Promise<void> {
    const now = new Date().toISOString();
    await this.db
      .insertInto('engine_versions')
      .values({ name, version, modification_date: now })
      .onConflict((conflict) =>
        conflict.column('name').doUpdateSet({ version, modification_date: now }),
      )
      .execute();
  }
}
