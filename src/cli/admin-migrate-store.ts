import { type Command, InvalidArgumentError } from 'commander';
import { loadConfig } from '../config.js';
import { copyStore, holdsData, type TableCopy } from '../store/copy-store.js';
import { openStore } from '../store/open-store.js';
import { ProgressLine } from './progress.js';

function postgresUrl(value: string): string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new InvalidArgumentError('expected postgres://user:password@host:port/database');
  }
  if (url.protocol !== 'postgres:' && url.protocol !== 'postgresql:') {
    throw new InvalidArgumentError('expected postgres://user:password@host:port/database');
  }
  return value;
}

/** `assay admin migrate-store --to postgres://…`: an embedded deployment's store into PostgreSQL. */
export function registerMigrateStoreCommand(admin: Command): void {
  admin
    .command('migrate-store')
    .description(
      'copy the store (accounts, keys, tokens, results, traces, pending jobs and callbacks) into a PostgreSQL database',
    )
    .requiredOption(
      '--to <url>',
      'the PostgreSQL database: postgres://user:password@host/db',
      postgresUrl,
    )
    .option('--force', 'copy into a database that holds data already (rows it has are kept)')
    .action(async (options: { to: string; force?: boolean }) => {
      const config = loadConfig();
      if (config.databaseUrl === options.to) {
        throw new InvalidArgumentError('--to is the store ASSAY_DATABASE_URL names already');
      }
      const source = await openStore(config);
      try {
        const target = await openStore({ ...config, databaseUrl: options.to });
        try {
          if (options.force !== true && (await holdsData(target))) {
            throw new InvalidArgumentError(
              'the target database holds data already: nothing was copied (--force copies into it, keeping its rows)',
            );
          }
          const progress = new ProgressLine();
          let current: TableCopy['table'] | null = null;
          const copies = await copyStore(source, target, (copy) => {
            if (current !== null && current !== copy.table) progress.done();
            current = copy.table;
            progress.update(copy.table.padEnd(19), copy.copied + copy.skipped, copy.total);
          });
          progress.done();
          for (const { table, copied, skipped } of copies) {
            console.log(
              `${table}: ${copied} copied${skipped > 0 ? `, ${skipped} kept as they were` : ''}`,
            );
          }
          console.log(
            `done: start the service with ASSAY_DATABASE_URL set to the target; pending jobs' content stays in ${config.dataDir}/spool`,
          );
        } finally {
          await target.close();
        }
      } finally {
        await source.close();
      }
    });
}
