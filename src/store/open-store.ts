import { openSqliteStore } from './dialects/sqlite.js';
import type { Store } from './store.js';

export interface StoreSettings {
  /** SQLite's file lives here when no database URL is given. */
  dataDir: string;
  /** `postgres://…`: PostgreSQL; empty: the embedded SQLite database. */
  databaseUrl: string;
  databasePoolSize: number;
}

/**
 * The one place that picks a dialect: everything else sees a `Store`. pg is imported only for
 * PostgreSQL: a service on SQLite never loads it.
 */
export async function openStore(
  settings: StoreSettings,
  onConnectionError: (error: Error) => void = () => {},
  onCheckpointError: (message: string) => void = () => {},
): Promise<Store> {
  if (settings.databaseUrl === '') return openSqliteStore(settings.dataDir, onCheckpointError);
  const { openPostgresStore } = await import('./dialects/postgres.js');
  return openPostgresStore(settings.databaseUrl, {
    poolSize: settings.databasePoolSize,
    onConnectionError,
  });
}
