import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import SQLite from 'better-sqlite3';
import {
  CompiledQuery,
  type DatabaseConnection,
  type DialectAdapter,
  type Driver,
  Kysely,
  type QueryResult,
  type SqliteDatabase,
  SqliteDialect,
  type SqliteDialectConfig,
  SqliteDriver,
  type SqliteStatement,
} from 'kysely';
import { offerDirectStatements } from '../direct-statements.js';
import { FileDataSync } from '../disk-sync.js';
import type { Database } from '../schema.js';
import { Store } from '../store.js';
import { BACKSTOP_CHECKPOINT_PAGES, SqliteCheckpoints } from './sqlite-checkpoints.js';

/**
 * Transactions begin IMMEDIATE: they take the write lock at once, waiting for it up to
 * busy_timeout. A deferred transaction that reads, then writes while another process holds the
 * lock (several processes on one data dir: `--processes`, roles) fails at once with SQLITE_BUSY,
 * since waiting could deadlock; an immediate one waits its turn.
 */
class ImmediateTransactionDriver extends SqliteDriver {
  override async beginTransaction(connection: DatabaseConnection): Promise<void> {
    await connection.executeQuery(CompiledQuery.raw('begin immediate'));
  }
}

class AssaySqliteDialect extends SqliteDialect {
  constructor(
    private readonly settings: SqliteDialectConfig & {
      database: SqliteDatabase;
      /** The connection itself, for whether a transaction is open on it. */
      connection: SQLite.Database;
    },
  ) {
    super(settings);
  }

  override createDriver(): Driver {
    return new ImmediateTransactionDriver(this.settings);
  }

  // The statements every item runs (QueryTemplate) go straight to better-sqlite3 where that gives
  // the same answer (direct-statements.ts): what Kysely's SQLite driver does with them, without
  // its executor around it.
  override createAdapter(): DialectAdapter {
    const adapter = super.createAdapter();
    const { database, connection } = this.settings;
    offerDirectStatements(adapter, {
      get inTransaction() {
        return connection.inTransaction;
      },
      reads: (text) => database.prepare(text).reader,
      run<Row>(text: string, parameters: readonly unknown[]): QueryResult<Row> {
        const statement = database.prepare(text);
        if (statement.reader) return { rows: statement.all(parameters) as Row[] };
        const { changes, lastInsertRowid } = statement.run(parameters);
        return {
          numAffectedRows: changes === undefined || changes === null ? undefined : BigInt(changes),
          insertId:
            lastInsertRowid === undefined || lastInsertRowid === null
              ? undefined
              : BigInt(lastInsertRowid),
          rows: [],
        };
      },
    });
    return adapter;
  }
}

const STATEMENT_CACHE_SIZE = 256;

/**
 * Kysely prepares every query anew; preparing costs more than running a small one, so statements
 * are kept by their SQL text. Queries are built from a fixed set of shapes, so the cache stays
 * small; the bound only guards against an unforeseen stream of distinct texts.
 */
function withStatementCache(database: SQLite.Database): SqliteDatabase {
  const statements = new Map<string, SqliteStatement>();
  return {
    close: () => database.close(),
    prepare(text: string): SqliteStatement {
      let statement = statements.get(text);
      if (statement === undefined) {
        if (statements.size >= STATEMENT_CACHE_SIZE) statements.clear();
        statement = database.prepare(text);
        statements.set(text, statement);
      }
      return statement;
    },
  };
}

/**
 * Opens (creating if needed) the embedded SQLite database in the data dir and migrates it.
 * `onCheckpointError`: told when the checkpointing thread fails (the connection's own backstop
 * checkpoints then keep the WAL bounded).
 */
export async function openSqliteStore(
  dataDir: string,
  onCheckpointError: (message: string) => void = () => {},
): Promise<Store> {
  mkdirSync(dataDir, { recursive: true });
  const database = new SQLite(join(dataDir, 'assay.db'));
  // WAL lets readers run beside the writer; NORMAL is durable across process crashes in WAL mode
  // and does not sync at commit. A durable transaction syncs the WAL after its commit instead
  // (what synchronous=FULL does at commit), on libuv's threads: better-sqlite3's own sync would
  // block the event loop, and every other request with it. SQLite syncs the data dir itself when
  // it creates the WAL (checked with strace).
  database.pragma('journal_mode = WAL');
  database.pragma('synchronous = NORMAL');
  database.pragma('busy_timeout = 5000');
  database.pragma('foreign_keys = ON');
  database.pragma(`wal_autocheckpoint = ${BACKSTOP_CHECKPOINT_PAGES}`);
  const walSync = new FileDataSync(`${database.name}-wal`);
  const checkpoints = new SqliteCheckpoints(database.name, onCheckpointError);
  const store = new Store(
    new Kysely<Database>({
      dialect: new AssaySqliteDialect({
        database: withStatementCache(database),
        connection: database,
      }),
    }),
    () => walSync.sync(),
    undefined,
    async () => {
      await walSync.close();
      await checkpoints.stop();
    },
  );
  try {
    await store.migrate();
  } catch (error) {
    await store.close();
    throw error;
  }
  return store;
}
